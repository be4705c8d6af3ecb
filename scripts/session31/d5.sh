#!/usr/bin/env bash
# Session 31, device call 5: device_attention's 16-bit tensor-core cases again, with the test's
# every-engine check skipped when SINTER_TEST_CASES narrows the cases (it failed calls 2 and 4 on
# the missing f32 FMA tunings, after every tuning had passed).
source scripts/device_env.sh
SINTER_TEST_CASES='f16 m128' timeout 150 .cudatest/device_attention 2>&1 | grep -E '^test result|FAILED|panicked|tunings' | head -8
echo "== done ($SECONDS s)"
