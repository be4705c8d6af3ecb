#!/usr/bin/env bash
# Session 16, device call 4 (issue 12): which attention tiles lose least to a cold L2. ncu times one
# flushed launch of each tile at each timing shape (--cache-control all, per launch configuration),
# one tuning per process; torch's SDPA kernels the same way.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
N="ncu --cache-control all --clock-control none --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics gpu__time_duration.sum"
for T in "wgmma-tma-persistent 64x128 wg1+1 s3" "wgmma-tma-persistent 128x128 wg2+1 s3" "wgmma-tma-persistent 128x64 wg2+1 s4" "wgmma-tma 128x128 wg2+1 s3" "wgmma-tma 64x128 wg1+1 s3" "wgmma 64x128 wg1 s2"; do
  echo "-- $T ($SECONDS s)"
  SINTER_TEST_TUNINGS="$T" timeout 60 $N -k regex:^k .cudatest/device_attention --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep -E "gpu__time|^  k0" | paste - - | awk '{print $2, $3, $(NF)}' | head -6
done
echo "-- torch ($SECONDS s)"
timeout 60 $N -k regex:flash python3 scripts/torch_sdpa.py 2>&1 | grep -E "gpu__time|^  [a-z]" | paste - - | awk '{print $2, $3, $(NF)}' | head -6
echo "== done ($SECONDS s)"
