#!/usr/bin/env bash
# Session 16, device call 1: causal attention in sections, longest row tiles first (issue 12);
# the tensor-core matmul epilogue in column pairs, 16-bit split-k on the 128x64 tile (issue 11).
# Checks against the interpreter first, then timings beside torch in the same call.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) attention against the interpreter ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent,wgmma 64x128 wg1 s2,mma 64x64 w4 s2"
SINTER_TEST_TUNINGS="$F" timeout 170 .cudatest/device_attention --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -8
timeout 100 .cudatest/device_dynamic --test-threads=1 > /tmp/d.log 2>&1; echo "dynamic rc $?"; grep -E "^test |^test result|panicked" /tmp/d.log | head -8
echo "== (b) matmul against the interpreter ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma 128x256x64 c2 s3,wgmma 192x128x64 g3 s4,mma 128x128x32 w2x2 s3" timeout 120 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches_the_interpreter_with_every_tuning > /tmp/mm.log 2>&1; echo "matmul rc $?"
grep -c " ok$" /tmp/mm.log; grep -E "FAILED|test result|panicked" /tmp/mm.log | head -5
for t in suite device_implicit; do
  timeout 150 .cudatest/$t --test-threads=2 > /tmp/$t.log 2>&1; echo "$t rc $?"
  grep -E "^test result|FAILED|panicked" /tmp/$t.log | head -6
done
echo "== (c) attention timing ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 128x128 wg2+1 s3,wgmma-tma-persistent 64x128 wg1+1 s3"
SINTER_TEST_TUNINGS="$F" timeout 120 .cudatest/device_attention --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit\|decode"
python3 scripts/torch_sdpa.py 2>&1 | grep -v "s1 "
echo "== (d) matmul timing ($SECONDS s)"
for n in 2048 4096 8192; do
  SINTER_TIMING_N=$n SINTER_TEST_TUNINGS="wgmma-tma 128x256x64 c2 s3" timeout 60 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings 2>&1 | grep -E "TFLOP|panicked"
done
python3 scripts/torch_matmul.py 2048 4096 8192
cp /tmp/a.log /tmp/b.log /tmp/d.log /tmp/mm.log /tmp/suite.log /tmp/device_implicit.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
