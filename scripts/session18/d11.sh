#!/usr/bin/env bash
# Session 18, device call 11 (issues 11, 13): exported ResNet-18 (constant weights), batch 8: cuDNN
# with KRSC weights (permuted on threads) and without, compile and warm-start times.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1 SINTER_REQUIRE_CUDA=1
B=$PWD/.pack2/sinter
timeout 200 python3 onnx/models/zoo_check.py --bin $B --models resnet18 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | grep -E "^resnet18 +legacy +dynamic"
for krsc in 1 0 1 0; do
  SINTER_CUDNN_KRSC=$krsc timeout 60 $B bench --backend cuda --model /tmp/zoo/resnet18/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/resnet18 krsc=$krsc /"
done
echo "== done ($SECONDS s)"
