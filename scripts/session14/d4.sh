#!/usr/bin/env bash
# Session 14, device call 4 (issue 11): the TMA tile as the default own tile for large 16-bit
# products on sm_90a: timed against the former default (cp.async wgmma 192x128) at 2048^3,
# 4096^3 and 8192^3 bf16; the CUDA shared suite and device tests with the new default.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for n in 2048 4096 8192; do
  SINTER_TIMING_N=$n SINTER_TEST_TUNINGS="wgmma 192x128x64 g3 s4,wgmma-tma 128x256x64 c2 s3" timeout 120 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings 2>&1 | grep -E "TFLOP|panicked"
done
echo "== suite ($SECONDS s)"
for t in suite device device_implicit; do
  timeout 300 .cudatest/$t --test-threads=1 > /tmp/$t.log 2>&1; echo "$t rc $?"
  grep -E "^test result|FAILED|panicked" /tmp/$t.log | head -8
done
SINTER_TEST_TUNINGS="wgmma 192x128x64 g3 s4,wgmma-tma 128x256x64 c2 s3" timeout 200 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches_the_interpreter_with_every_tuning > /tmp/mm.log 2>&1; echo "matmul rc $?"
grep -c " ok$" /tmp/mm.log; grep -E "FAILED|test result" /tmp/mm.log | head -5
cp /tmp/suite.log /tmp/device.log /tmp/mm.log $OUT/
echo "== done ($SECONDS s)"
