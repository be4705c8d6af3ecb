#!/usr/bin/env bash
# Session 13, device call 9 (issue 12): the softmax's row maximum and sum in up to four
# independent chains (ncu of call 8: fixed-latency dependency waits were the largest stall). The
# main tiles of every engine against the interpreter, then timed at the benchmark shapes.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
t=.cudatest/device_attention
F="wgmma 64x128 wg1 s2,wgmma-tma 128x128 wg2+1 s3,wgmma-ov 128x128 wg2 s3,mma 128x64 w4 s3,wgmma-pp 128x128 wg2+1 s3"
SINTER_TEST_TUNINGS="$F" timeout 120 $t --test-threads=1 --nocapture attention_matches > /tmp/check.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/check.log; grep -E "FAILED|^test result" /tmp/check.log | head -8
SINTER_TEST_TUNINGS="$F" timeout 120 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/timing.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/timing.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit"
