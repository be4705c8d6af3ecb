#!/usr/bin/env bash
# Session 11, device call 5: the final tree (rows shorter than 32 keep a thread per row). The CUDA
# suite, EfficientNet-B0 beside torch and its profile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 110 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head -8
PYTHONUNBUFFERED=1 timeout 150 python3 onnx/models/zoo_check.py --bin "$BIN" --models efficientnet_b0 \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -6
timeout 60 $BIN profile --backend cuda --model /tmp/zoo/efficientnet_b0/legacy/model.onnx --dim batch=8 --out /tmp/p_f32 > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p_f32 8 2>&1 | tail -9
mkdir -p $OUT; cp /tmp/p_f32/profile.json $OUT/p_f32.json
