#!/usr/bin/env bash
# Session 9, device call 6: the branch-free logistic (CUDA prelude) against the CPU reference:
# the shared suite's sigmoid and SiLU cases (specials included), and the dtype cases.
set -uo pipefail
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include
timeout 120 .cudatest/suite sigmoid silu dtype_ matmul_bias_relu --test-threads 4 2>&1 | grep -E "^test |test result" | tail -20
