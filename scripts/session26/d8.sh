#!/usr/bin/env bash
# Session 26, device call 8: `device_dynamic` (two test threads) with an empty cubin cache each
# run, old (98f2927) and new alternating, old first: calls 4 and 7 failed only on the machine's
# first run of the new build, which compiled every cubin.
source scripts/device_env.sh
for rep in 1 2 3; do for v in old new; do
  t=.cudatest/device_dynamic; [ $v = old ] && t=.cudatest/device_dynamic_old
  SINTER_CACHE_DIR=/tmp/dd_${v}_$rep timeout 100 $t --test-threads 2 > /tmp/t.log 2>&1; rc=$?
  echo "$v rep $rep rc $rc ($SECONDS s): $(grep -E '^test result' /tmp/t.log | cut -c1-40) $(grep -E 'panicked at' -A1 /tmp/t.log | head -2 | cut -c1-140 | tr '\n' ' ')"
done; done
echo "== done ($SECONDS s)"
