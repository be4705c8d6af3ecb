#!/usr/bin/env bash
# Session 11, device call 1: where ConvNeXt-Tiny's and EfficientNet-B0's time goes (issue 13),
# sinter's per-kernel profile beside torch.compile's, f32 (TF32 convolutions) and bf16.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
PYTHONUNBUFFERED=1 timeout 240 python3 onnx/models/zoo_check.py --bin "$BIN" --models convnext_tiny,efficientnet_b0 \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -4
for m in convnext_tiny efficientnet_b0; do
  for p in f32 bf16; do
    echo "== sinter $m $p"
    timeout 60 $BIN profile --backend cuda --model /tmp/zoo/$m/legacy/model.onnx --dim batch=8 --precision $p --out /tmp/p_${m}_$p > /dev/null 2>&1
    python3 scripts/session9/top.py /tmp/p_${m}_$p 12 2>&1 | tail -13
    flag=""; [ $p = bf16 ] && flag=--bf16
    timeout 120 python3 scripts/torch_top.py $m $flag 12 2>&1 | grep -v Warning | tail -13
  done
done
mkdir -p $OUT && cp /tmp/p_*/profile.json $OUT/ 2>/dev/null; for d in /tmp/p_*; do cp $d/profile.json $OUT/$(basename $d).json; done
