#!/usr/bin/env bash
# Session 20, device call 1 (issues 11, 13): the review commits of session 19 checked on the device
# (device_implicit, resnet18 at reduced scale), then issue 13's model table as it stands: the
# seven models at batch 8 (8 x 128 tokens), legacy exporter, f32 and bf16 autocast, beside torch
# eager and torch.compile in the same call (zoo_check.py --base --bf16).
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test result|FAILED|panicked" /tmp/impl.log | head -6
timeout 60 $B bench --backend cuda --workload resnet18_b32_f32 --scale reduced --check --no-calibrate 2>&1 | grep -E "^resnet18|check" | head -3
echo "== (b) models ($SECONDS s)"
MODELS=resnet18,resnet50,convnext_tiny,efficientnet_b0,vit_b_16,bert,gpt2
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 500 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --work /tmp/zoo --keep --exporters legacy --batch 8 --base --bf16 \
  --iters 10 --budget-s 420 --json $OUT/zoo.json 2>&1 | tail -30 | cut -c1-360
echo "== done ($SECONDS s)"
