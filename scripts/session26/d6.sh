#!/usr/bin/env bash
# Session 26, device call 6: `device_dynamic` with two test threads (call 4's failure), old
# (98f2927) and new alternating, three times each; then the suite with two threads again.
source scripts/device_env.sh
for rep in 1 2 3; do
  for v in old new; do
    t=.cudatest/device_dynamic; [ $v = old ] && t=.cudatest/device_dynamic_old
    timeout 120 $t --test-threads 2 > /tmp/t.log 2>&1; rc=$?
    echo "$v rep $rep rc $rc: $(grep -E '^test result' /tmp/t.log | cut -c1-60) $(grep -E 'panicked at' /tmp/t.log | head -2 | cut -c1-120 | tr '\n' ' ')"
  done
done
echo "== done ($SECONDS s)"
