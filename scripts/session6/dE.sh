#!/usr/bin/env bash
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
timeout 60 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --scale reduced --check --iters 3 --warmup 1 2>&1 | grep -E "resnet18|rror" | cut -c1-220
$BIN calibrate --backend cuda 2>&1 | grep -c peak
$BIN bench --backend cuda --workload resnet18_b32_f32 --json "$OUT/def.json" 2>&1 | grep -E "^resnet|#   k" | cut -c1-160
SINTER_SPLIT_K=0 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 2>&1 | grep "^resnet"
PYTHONUNBUFFERED=1 timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32 --out "$OUT/torch.json" >"$OUT/torch.log" 2>&1; tail -1 "$OUT/torch.log"
python3 .bench/compare.py "$OUT/torch.json" "$OUT/def.json"
