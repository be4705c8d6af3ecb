#!/usr/bin/env bash
# Session 36, device call 5: the workload's own kernel source on the test's buffers beside the executable and the test's case.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  timeout 120 $t --ignored --nocapture --test-threads=1 beside_the_executable 2>&1 | grep -E "round|buffers|kernel" | sed "s/^/$r: /" | cut -c1-300
done
echo "== done ($SECONDS s)"
