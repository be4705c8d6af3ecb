#!/usr/bin/env bash
# Session 26, device call 5: call 4's `device_dynamic` failure (an illegal address) with the new
# load (plans on their own thread, memory beside NVRTC) against the old (98f2927), one test at a
# time, then compute-sanitizer on the first failing test.
source scripts/device_env.sh
for v in old new; do
  t=.cudatest/device_dynamic; [ $v = old ] && t=.cudatest/device_dynamic_old
  for name in $($t --list 2>/dev/null | grep ': test$' | sed 's/: test$//'); do
    timeout 120 $t --exact $name --test-threads 1 > /tmp/t.log 2>&1; rc=$?
    echo "$v $name rc $rc $(grep -E 'panicked|ILLEGAL' /tmp/t.log | head -2 | cut -c1-200 | tr '\n' ' ')"
    [ $rc != 0 ] && [ $v = new ] && [ -z "${FAILED:-}" ] && FAILED=$name
  done
done
if [ -n "${FAILED:-}" ]; then
  echo "== compute-sanitizer on $FAILED ($SECONDS s)"
  timeout 200 compute-sanitizer --tool memcheck --print-limit 5 .cudatest/device_dynamic --exact $FAILED --test-threads 1 2>&1 \
    | grep -E "Invalid|at |by thread|Address|Saved host|ERROR SUMMARY|k[0-9]+_" | head -30 | cut -c1-220
fi
echo "== done ($SECONDS s)"
