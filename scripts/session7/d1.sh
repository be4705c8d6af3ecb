#!/usr/bin/env bash
# Session 7, device call 1: the tiled CUDA-core attention (AttnEngine::Fma) checked against the
# interpreter with every tuning, the dynamic-batch tests, then torchvision's ViT-B/16 and
# ResNet-18 beside torch eager / torch.compile in the same call, and a profile of the ViT.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 240 .cudatest/device_attention --test-threads 1 attention_matches > "$OUT/attn.log" 2>&1; echo "device_attention rc=$?"
grep -E "FAILED|tunings run per engine|test result|panicked" "$OUT/attn.log" | head -20
grep -E "attention fma" "$OUT/attn.log" | awk '{print $NF}' | sort | uniq -c
timeout 120 .cudatest/device_dynamic --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head
timeout 200 python3 onnx/models/zoo_check.py --bin "$BIN" --models vit_b_16,resnet18 --exporters legacy --work /tmp/zoo --json "$OUT/zoo.json" 2>&1 | tail -8
M=/tmp/zoo/vit_b_16/legacy/model.onnx
if [ -f "$M" ]; then
  I=$(ls /tmp/zoo/vit_b_16/input_*.npy | head -1)
  timeout 120 $BIN profile --model "$M" --input "$I" --backend cuda --out /tmp/prof_vit > "$OUT/prof_vit.log" 2>&1; echo "profile rc=$?"
  cp /tmp/prof_vit/profile.json "$OUT/prof_vit.json" 2>/dev/null
  grep -iE "attention|total|kernels" "$OUT/prof_vit.log" | head -20
fi
