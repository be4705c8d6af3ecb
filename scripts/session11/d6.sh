#!/usr/bin/env bash
# Session 11, device call 6: short persistent rows on one warp each, 8 rows per block. The CUDA
# suite (its norm and softmax cases now include 4500 rows of 49), then EfficientNet-B0 f32 and
# ConvNeXt-Tiny bf16 profiles (models exported in this call, no torch timing: device time).
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 110 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head -8
PYTHONUNBUFFERED=1 timeout 100 python3 onnx/models/zoo_check.py --bin "$BIN" --models efficientnet_b0,convnext_tiny \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --iters 10 --no-torch-timing 2>&1 | tail -4
for m in efficientnet_b0 convnext_tiny; do
  timeout 40 $BIN profile --backend cuda --model /tmp/zoo/$m/legacy/model.onnx --dim batch=8 --out /tmp/p_$m > /dev/null 2>&1
  python3 scripts/session9/top.py /tmp/p_$m 6 2>&1 | tail -7
done
mkdir -p $OUT; for d in /tmp/p_*; do cp $d/profile.json $OUT/$(basename $d).json; done
