#!/usr/bin/env bash
# Session 22, device call 4 (issue 13): the model table after the channels-last regions and the
# four-channel depthwise windows: seven models at batch 8 (8 x 128 tokens), legacy exporter, f32
# and bf16 autocast, beside torch eager and torch.compile in the same call (as session 20's d4.sh).
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
MODELS=resnet18,resnet50,convnext_tiny,efficientnet_b0,vit_b_16,bert,gpt2
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 500 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --work /tmp/zoo --exporters legacy --batch 8 --base --bf16 \
  --iters 10 --budget-s 420 --json $OUT/zoo.json 2>&1 | grep -vE "^  [a-z_0-9]+: this process|done in|PASS +err|warn" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-420
echo "== done ($SECONDS s)"
