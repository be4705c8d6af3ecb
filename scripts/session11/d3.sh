#!/usr/bin/env bash
# Session 11, device call 3: squeeze pools on a workgroup per row, excitation convolutions as one
# product over the images. The CUDA suite, then EfficientNet-B0, ConvNeXt-Tiny and ResNet-50 beside
# torch (f32 and bf16), EfficientNet's profiles, and one cold compile's phases.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 110 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head -8
timeout 60 .cudatest/device tensor_core_and_library --test-threads 1 2>&1 | grep -E "^test |panicked" -A3 | head -6
PYTHONUNBUFFERED=1 timeout 300 python3 onnx/models/zoo_check.py --bin "$BIN" --models efficientnet_b0,convnext_tiny,resnet50 \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -12
for p in f32 bf16; do
  echo "== sinter efficientnet_b0 $p"
  timeout 60 $BIN profile --backend cuda --model /tmp/zoo/efficientnet_b0/legacy/model.onnx --dim batch=8 --precision $p --out /tmp/p_$p > /dev/null 2>&1
  python3 scripts/session9/top.py /tmp/p_$p 8 2>&1 | tail -9
done
echo "== cold compile (empty cache), EfficientNet-B0 f32"
SINTER_CACHE_DIR=/tmp/cold timeout 60 $BIN profile --backend cuda --model /tmp/zoo/efficientnet_b0/legacy/model.onnx --dim batch=8 --out /tmp/p_cold > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p_cold 1 2>&1 | head -2
mkdir -p $OUT; for d in /tmp/p_*; do cp $d/profile.json $OUT/$(basename $d).json; done
