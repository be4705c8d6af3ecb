#!/usr/bin/env bash
# Session 12, device call 6: attention reads q and k^T in place when they are only scaled by a
# constant (the math form of scaled_dot_product_attention, GPT-2's export). The CUDA suite (its
# attention cases gained one scaled that way), then GPT-2 small beside torch.compile and its profile.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include SINTER_CACHE_DIR=/tmp/sc
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
timeout 120 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked|split-scale" | head -8
PYTHONUNBUFFERED=1 timeout 100 python3 onnx/models/zoo_check.py --bin "$BIN" --models gpt2 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --base --iters 10 2>&1 | grep -E "^gpt2 " | tail -2
d=/tmp/zoo/gpt2; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
timeout 60 $BIN profile --backend cuda --model $d/legacy/model.onnx $ins --out /tmp/p_gpt2 > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p_gpt2 14 2>&1 | tail -16
