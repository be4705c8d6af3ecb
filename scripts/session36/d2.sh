#!/usr/bin/env bash
# Session 36, device call 2: the executable and the rendered kernel alternating in one process on
# the backend's own device (`attention_timing_beside_the_executable`: four rounds, 100 runs each,
# quantiles), in two processes; the loop's buffer addresses; `bench` once.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  timeout 120 $t --ignored --nocapture --test-threads=1 beside_the_executable 2>&1 | grep -E "round|fill" | sed "s/^/$r: /"
done
SINTER_TEST_FILL=workload SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3" SINTER_TEST_GAP_BYTES=125829120 \
  timeout 120 $t --ignored --nocapture --test-threads=1 'attention_timing' --exact 2>&1 | grep -E "TFLOP|buffers of" | sort -u | cut -c1-220
echo "bench: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"
echo "== done ($SECONDS s)"
