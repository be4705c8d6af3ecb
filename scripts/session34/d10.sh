#!/usr/bin/env bash
# Session 34, device call 10: what in `bench`'s process makes the d64 kernel 2% slower than the
# device test's loop. `bench` as is, without the vendor libraries (no cuBLASLt thread or handle:
# SINTER_CUDA_LIBRARY=0), with 200 timed runs; the device test's per-launch loop after the clear.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  echo "$r default: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"
  echo "$r no library: $(SINTER_CUDA_LIBRARY=0 SINTER_CACHE_DIR=/tmp/sc_b timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"
  echo "$r iters 200: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate --iters 200 2>&1 | grep -E '^attention' | awk '{print $4}')"
  SINTER_TEST_FILL=normal SINTER_TEST_GAP_BYTES=104857600 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c30-100 | sed "s/^/$r test gap100M: /"
done
echo "== done ($SECONDS s)"
