#!/usr/bin/env bash
# Session 7, device call 5: exact f32 products from 1e8 FLOP on cuBLASLt in default mode. The
# library test (an f32 ViT projection included), then the zoo models beside torch in one call.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 .cudatest/device --test-threads 1 > "$OUT/device.log" 2>&1; echo "device rc=$? $(grep -E '^test result' "$OUT/device.log")"
grep -E "FAILED|panicked" -A3 "$OUT/device.log" | head -8
timeout 420 python3 onnx/models/zoo_check.py --bin "$BIN" --models vit_b_16,resnet18,bert,gpt2,resnet50 --exporters legacy --budget-s 330 --json "$OUT/zoo.json" 2>&1 | tail -10
