#!/usr/bin/env bash
# Session 35, device call 6: `bench`'s +1.5% on the d64 attention kernel, bisected. In one test
# process: the rendered kernel's loop (each launch after an L2 clear) and the workload compiled
# through the library, timed in `bench`'s order (`attention_timing_through_the_executable`);
# the executable's test alone; `bench`. Twice, alternating.
source scripts/device_env.sh
t=.cudatest/device_attention
export SINTER_TEST_FILL=workload SINTER_TEST_GAP_BYTES=125829120 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3"
for r in 1 2; do
  timeout 120 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep -E "TFLOP|executable," | grep -vE "^\s*$" | sort -u | sed "s/^/$r both: /" | cut -c1-120
  timeout 120 $t --ignored --nocapture --test-threads=1 through_the_executable 2>&1 | grep -E "executable," | sed "s/^/$r alone: /"
  echo "$r bench: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"
done
echo "== done ($SECONDS s)"
