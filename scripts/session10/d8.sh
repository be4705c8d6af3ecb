#!/usr/bin/env bash
# Session 10, device call 8: skinny products (classifier heads) on cuBLASLt. The library test,
# then ResNet-50 b8 f32 beside torch and its per-kernel profile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 .cudatest/device tensor_core_and_library --test-threads 1 2>&1 | grep -E "^test |panicked" -A3 | head -8
PYTHONUNBUFFERED=1 timeout 100 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --iters 10 2>&1 | tail -3
timeout 40 $BIN profile --backend cuda --model /tmp/zoo/resnet50/legacy/model.onnx --dim batch=8 --out /tmp/p > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p 7 2>&1 | tail -8
