#!/usr/bin/env bash
# Session 11, device call 4: window kernels over rows stored whole on a workgroup per output (the
# shared suite's squeeze-and-excitation convolutions), the one-product fold taken back. The CUDA
# suite, then EfficientNet-B0, ConvNeXt-Tiny, ResNet-50 and ResNet-18 beside torch, f32 and bf16.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 110 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head -8
PYTHONUNBUFFERED=1 timeout 330 python3 onnx/models/zoo_check.py --bin "$BIN" --models efficientnet_b0,convnext_tiny,resnet50,resnet18 \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -14
echo "== sinter efficientnet_b0 f32"
timeout 60 $BIN profile --backend cuda --model /tmp/zoo/efficientnet_b0/legacy/model.onnx --dim batch=8 --out /tmp/p_f32 > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p_f32 8 2>&1 | tail -9
mkdir -p $OUT; for d in /tmp/p_*; do cp $d/profile.json $OUT/$(basename $d).json; done
