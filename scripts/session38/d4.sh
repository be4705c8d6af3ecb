#!/usr/bin/env bash
# Session 38, device call 9 (the final build with the run_device mend): memcheck over
# device_dynamic (no error expected), then device_dynamic four times with the driver's JIT cache
# off (one in four failed before), the suite and `device`.
source scripts/device_env.sh
CS=/usr/local/cuda/bin/compute-sanitizer
echo "== memcheck, device_dynamic ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/m1 timeout 200 $CS --tool memcheck --print-limit 3 .cudatest/device_dynamic --test-threads=1 2>&1 | grep -E "Invalid|^=========\s+at |test |ERROR SUMMARY" | head -16
echo "== device_dynamic, JIT cache off, x4 ($SECONDS s)"
for i in 1 2 3 4; do SINTER_CACHE_DIR=/tmp/c$i CUDA_CACHE_DISABLE=1 timeout 100 .cudatest/device_dynamic 2>&1 | grep -E "test result|panicked" -A2 | head -6; done
echo "== suite, device ($SECONDS s)"
for t in suite device; do timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -3 | sed "s/^/$t: /"; done
echo "== done ($SECONDS s)"
