#!/usr/bin/env bash
# Session 9, device call 7: f32 attention at BERT-base's and ViT-B/16's shapes (8 x 12 heads x
# 128 or 197 tokens, d 64; `python3 scripts/session9/attn_onnx.py .bench/attn` writes them): every
# tiled CUDA-core tile max-autotune times, beside the default tile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name --format=csv,noheader
for m in attn_bert attn_vit; do
  timeout 40 $BIN bench --model .bench/attn/$m.onnx --backend cuda 2>&1 | grep -vE '^# \[' | tail -3 | cut -c1-220
  SINTER_LOG=autotune timeout 60 $BIN bench --model .bench/attn/$m.onnx --backend cuda --mode max-autotune 2>&1 | grep -iE "attention|attn|fma|winner" | cut -c1-220 | head -14
done
