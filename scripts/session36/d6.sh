#!/usr/bin/env bash
# Session 36, device call 6: the workload's d64 attention source and hand-edited copies of it
# (`.pack/variants/*.cu`: B the output cast of the device test's case, F/G/H/I 64/32/128/16
# `__nanosleep(0)` at the producer's start, moving only the producer's code), each on the test's
# buffers beside the executable and the test's case; torch's SDPA timed as the loop times.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  SINTER_TEST_VARIANTS=$PWD/.pack/variants timeout 150 $t --ignored --nocapture --test-threads=1 beside_the_executable 2>&1 | grep -E "round [0-3]|kernel" | sed "s/^/$r: /" | cut -c1-300
  python3 scripts/session34/sdpa_gap.py 125829120 2>&1 | sed "s/^/$r: /"
done
echo "== done ($SECONDS s)"
