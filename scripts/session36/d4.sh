#!/usr/bin/env bash
# Session 36, device call 4: `attention_timing_beside_the_executable` with the executable's 300
# runs split by hundreds, and the kernel alone plain and right after the inputs are uploaded again
# (as the executable's timing uploads them); then the kernel on the executable's freed blocks.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  timeout 120 $t --ignored --nocapture --test-threads=1 beside_the_executable 2>&1 | grep -E "round|buffers" | sed "s/^/$r: /" | cut -c1-300
done
echo "== done ($SECONDS s)"
