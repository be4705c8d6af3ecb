#!/usr/bin/env bash
# Session 14, device call 6 (issue 12): the decode template with its keys split over blocks
# (flash decoding): every decode tuning (splits 1 to 16, run twice: counters reset) against the
# interpreter, the shared suite's attention cases, then decode timings at batch 32 and batch 1
# beside torch's SDPA.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
t=.cudatest/device_attention
SINTER_TEST_TUNINGS="decode" timeout 120 $t --test-threads=1 --nocapture attention_matches > /tmp/c1.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/c1.log; grep -E "FAILED|^test result" /tmp/c1.log | head -8; grep -E "split" /tmp/c1.log | head -3
timeout 120 .cudatest/suite --test-threads=1 attention > /tmp/s.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED" /tmp/s.log | head -5
SINTER_TEST_TUNINGS="decode" timeout 120 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/c2.log 2>&1; echo "timing rc $?"
grep -E "^decode" /tmp/c2.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}'
python3 scripts/torch_sdpa.py 2>&1 | grep "s1 "
cp /tmp/c1.log /tmp/c2.log $OUT/
echo "== done ($SECONDS s)"
