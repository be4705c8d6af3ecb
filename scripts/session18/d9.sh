#!/usr/bin/env bash
# Session 18, device call 9 (issues 11, 13): exported ResNets (constant weights) with cuDNN reading
# KRSC weights and with SINTER_CUDNN_KRSC=0, batch 8, beside torch.compile (zoo_check, same call).
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1 SINTER_REQUIRE_CUDA=1
B=$PWD/.pack2/sinter
timeout 300 python3 onnx/models/zoo_check.py --bin $B --models resnet18,resnet50 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | tail -12
for m in resnet18 resnet50; do
  f=$(ls /tmp/zoo/$m/legacy/model.onnx 2>/dev/null) || continue
  for krsc in 1 0; do
    SINTER_CUDNN_KRSC=$krsc timeout 90 $B bench --backend cuda --model $f --dim batch=8 --no-calibrate 2>&1 | grep -E "^model|default" | sed "s/^/$m krsc=$krsc /" | head -2
  done
done
echo "== done ($SECONDS s)"
