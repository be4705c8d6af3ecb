#!/usr/bin/env bash
# Session 18, device call 13 (issues 11, 13): KRSC planned at build for constant weights: the
# cuDNN convolution tests, then exported ResNet-18 (batch 8) with and without, run and warm start.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1 SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_CUDNN=1
B=$PWD/.pack2/sinter
timeout 60 .pack2/device_implicit --test-threads=2 cudnn_ 2>&1 | grep -E "^test |test result|panicked" | head -8
timeout 100 python3 onnx/models/zoo_check.py --bin $B --models resnet18 --exporters legacy --batch 8 --work /tmp/zoo --keep --no-torch-timing 2>&1 | grep -E "^resnet18 +legacy +dynamic"
for krsc in 1 0 1; do
  SINTER_CUDNN_KRSC=$krsc timeout 40 $B bench --backend cuda --model /tmp/zoo/resnet18/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/resnet18 krsc=$krsc /"
done
echo "== done ($SECONDS s)"
