#!/usr/bin/env bash
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
step "calibrate"
timeout 150 $BIN calibrate --backend cuda 2>&1 | tail -8
step "bench"
$BIN bench --backend cuda --workload resnet18_b32_f32,matmul_8192_bf16,matmul_4096_f32 --json "$OUT/def.json" 2>&1 | grep -vE "^\s*$" | cut -c1-220 | head -40
SINTER_SPLIT_K=0 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 2>&1 | grep "^resnet"
PYTHONUNBUFFERED=1 timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32,matmul_8192_bf16,matmul_4096_f32 --out "$OUT/torch.json" >"$OUT/torch.log" 2>&1; tail -1 "$OUT/torch.log"
python3 .bench/compare.py "$OUT/torch.json" "$OUT/def.json"
