#!/usr/bin/env bash
# Session 36, device call 3: `attention_timing_beside_the_executable` with the executable's own
# cubin on the test's buffers, then, the executable dropped, the kernel on the test's first buffers
# and on a second set that takes the executable's freed blocks, alternating. Two processes.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  timeout 120 $t --ignored --nocapture --test-threads=1 beside_the_executable 2>&1 | grep -E "round|fill|buffers|cubin|cache:" | sed "s/^/$r: /" | cut -c1-300
done
echo "== done ($SECONDS s)"
