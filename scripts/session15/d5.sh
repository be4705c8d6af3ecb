#!/usr/bin/env bash
# Session 15, device call 5 (issue 12): the tensor-core attention epilogue storing each thread's
# two adjacent output columns as one vector (emit_group over N, two lanes), against the
# interpreter (every tensor-core engine; the shared suite's attention cases), then timed.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t=.cudatest/device_attention
echo "== (a) against the interpreter ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent,wgmma-pp 128x128 wg2+1 s3,wgmma 64x128 wg1 s2,wgmma-ov 128x128 wg2 s3,mma 128x64 w4 s3,mma 64x64 w4 s2"
SINTER_TEST_TUNINGS="$F" timeout 230 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -12
timeout 120 .cudatest/suite --test-threads=4 attention > /tmp/s.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED" /tmp/s.log | head -5
echo "== (b) timing ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 128x128 wg2+1 s3,wgmma-tma-persistent 64x128 wg1+1 s3,wgmma 64x128 wg1 s2"
SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit\|decode"
python3 scripts/torch_sdpa.py 2>&1 | grep -v "s1 "
cp /tmp/a.log /tmp/b.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
