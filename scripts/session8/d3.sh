#!/usr/bin/env bash
# Session 8, device call 3 (issue 13's performance targets at their sizes): torchvision ViT-B/16
# and ResNet-50 at batch 8, BERT-base and GPT-2 small at 8 x 128 tokens, legacy exporter, sinter
# (TF32 convolutions as torch's default; exact f32 checked within 1e-4; bf16 autocast) beside
# torch eager, torch.compile and torch.compile under bf16 autocast, in one call.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
PYTHONUNBUFFERED=1 timeout 520 python3 onnx/models/zoo_check.py --bin "$BIN" --models vit_b_16,bert,gpt2,resnet50 \
  --exporters legacy --batch 8 --base --bf16 --iters 10 --budget-s 330 --json "$OUT/zoo.json" 2>&1 | tail -22
