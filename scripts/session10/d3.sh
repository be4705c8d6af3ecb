#!/usr/bin/env bash
# Session 10, device call 3: ResNet-50 at batch 8 (f32 with TF32 convolutions, and bf16) with and
# without cuDNN in the same call beside torch.compile, then per-kernel profiles of both, to decide
# where cuDNN's NCHW convolutions beat the own templates in default mode.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONUNBUFFERED=1 timeout 150 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -5
SINTER_CUDNN=0 PYTHONUNBUFFERED=1 timeout 100 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50 --no-torch-timing \
  --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -5
f=/tmp/zoo/resnet50/legacy/model.onnx
for p in f32 bf16; do
  for c in 1 0; do
    echo "== resnet50 $p cudnn=$c"
    SINTER_CUDNN=$c timeout 60 $BIN profile --backend cuda --model "$f" --dim batch=8 --precision $p --out /tmp/p-$p-$c > /dev/null 2>&1
    python3 scripts/session9/top.py /tmp/p-$p-$c 10 2>&1 | tail -11
  done
done
