#!/usr/bin/env bash
# Session 24, device call 5 (issue 13): `sinter run` now times whole runs (two events around each,
# as `bench` and do_bench do) instead of the span of per-kernel events; the zoo's table for the
# three models this session changed, beside torch.compile in the same call, f32 and bf16.
source scripts/device_env.sh
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 500 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,resnet50,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn|UserWarning" | cut -c1-300
echo "== done ($SECONDS s)"
