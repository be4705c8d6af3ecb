#!/usr/bin/env bash
# Session 26, device call 9: a fresh machine, in call 7's order but the OLD build's
# `device_dynamic` first: the suite, `device`, then device_dynamic old, new, old, new (two test
# threads). Calls 4 and 7 failed on the machine's first device_dynamic run, both the new build's.
source scripts/device_env.sh
timeout 120 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $? ($SECONDS s)"
timeout 60 .cudatest/device --test-threads 2 > /tmp/dev.log 2>&1; echo "device rc $? ($SECONDS s)"
for v in old new old new; do
  t=.cudatest/device_dynamic; [ $v = old ] && t=.cudatest/device_dynamic_old
  timeout 60 $t --test-threads 2 > /tmp/t.log 2>&1; rc=$?
  echo "$v rc $rc ($SECONDS s): $(grep -E '^test result' /tmp/t.log | cut -c1-40) $(grep -E 'panicked at' -A1 /tmp/t.log | head -2 | cut -c1-140 | tr '\n' ' ')"
done
