#!/usr/bin/env bash
# Final call: correctness after turning the four-column loader off; resnet18 and matmul beside torch.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
step "device_implicit"
timeout 80 .cudatest/device_implicit --test-threads=1 --nocapture 2>&1 | grep -E "rel L2|^test |test result" | head
step "resnet18 full check"
timeout 150 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --check --iters 3 --warmup 1 2>&1 | grep -E "resnet18|rror" | cut -c1-250
step "bench beside torch"
$BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32,matmul_8192_bf16 --json "$OUT/def.json" 2>&1 | grep -E "^resnet|^matmul|contraction" | cut -c1-200 | head -30
SINTER_SPLIT_K=0 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 2>&1 | grep "^resnet"
PYTHONUNBUFFERED=1 timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32,matmul_8192_bf16 --out "$OUT/torch.json" >"$OUT/torch.log" 2>&1; tail -2 "$OUT/torch.log"
python3 .bench/compare.py "$OUT/torch.json" "$OUT/def.json"
step "device_matmul every tuning (TMA, split-k)"
timeout 230 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches >"$OUT/mm.log" 2>&1; echo "rc=$?"; grep -c " ok$" "$OUT/mm.log"; grep -c "tma.* ok$" "$OUT/mm.log"; grep -c "split-k.* ok$" "$OUT/mm.log"; grep -E "FAILED|panicked|test result" "$OUT/mm.log" | head -8; tail -c 200 "$OUT/mm.log"
