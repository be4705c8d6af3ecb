#!/usr/bin/env bash
# Session 9, device call 5: issue 13's other torchvision families at batch 8 (EfficientNet-B0 and
# ConvNeXt-Tiny, never timed at this size), CUDA, f32 and bf16 autocast, torch in the same call.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
PYTHONUNBUFFERED=1 timeout 330 python3 onnx/models/zoo_check.py --bin "$BIN" --models efficientnet_b0,convnext_tiny \
  --exporters legacy --batch 8 --bf16 --iters 10 --timeout 120 --budget-s 250 --json "$OUT/zoo.json" 2>&1 | tail -12
