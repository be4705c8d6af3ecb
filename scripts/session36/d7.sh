#!/usr/bin/env bash
# Session 36, device call 7: the d64 workload source (A), with the test case's output cast (B), and with 16-byte output stores after a quad transpose (Q), each checked bit for bit against the workload's kernel and timed beside the executable; SDPA timed as the loop times.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2; do
  SINTER_TEST_VARIANTS=$PWD/.pack/variants timeout 150 $t --ignored --nocapture --test-threads=1 beside_the_executable 2>&1 | grep -E "round [0-3]|kernel|variant [A-Z]:" | sed "s/^/$r: /" | cut -c1-300
  python3 scripts/session34/sdpa_gap.py 125829120 2>&1 | sed "s/^/$r: /"
done
echo "== done ($SECONDS s)"
