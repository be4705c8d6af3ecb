#!/usr/bin/env bash
# Bisect resnet18's wrong result: split-k and the four-column im2col loader switched off one by one.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
for env in "" "SINTER_SPLIT_K=0" "SINTER_IM2COL_COLUMNS=1" "SINTER_SPLIT_K=0 SINTER_IM2COL_COLUMNS=1"; do
  for scale in reduced full; do
    step "resnet18 $scale check: ${env:-defaults}"
    env $env SINTER_CACHE_DIR=$(mktemp -d) timeout 60 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --scale $scale --check --iters 3 --warmup 1 2>&1 | grep -E "resnet18|rror|FAIL" | cut -c1-250
  done
done
step "device_implicit"
timeout 80 .cudatest/device_implicit --test-threads=1 --nocapture 2>&1 | grep -E "rel L2|^test |test result" | head
step "implicit conv every tuning"
timeout 120 .cudatest/device_matmul --test-threads=1 --nocapture implicit_conv >"$OUT/conv.log" 2>&1; echo "rc=$?"; grep -c " ok$" "$OUT/conv.log"; grep -c "split-k.* ok$" "$OUT/conv.log"; grep -E "FAILED|panicked|skipped|test result" "$OUT/conv.log" | head -12
