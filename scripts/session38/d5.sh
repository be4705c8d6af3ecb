#!/usr/bin/env bash
# Session 38, device call 13 (after the review's mend: the PTX product divides through expr's
# shared multiply-high division): the suite, the product workloads at full and reduced size
# `--check`, max-autotune over the f32 product's tiles.
source scripts/device_env.sh
timeout 100 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -3 | sed "s/^/suite: /"
SINTER_CACHE_DIR=/tmp/sc1 timeout 100 $B bench --backend cuda --check --no-calibrate --iters 3 --warmup 1 --workload matmul_softmax_100_f32 2>&1 | grep -E "^matmul" | cut -c1-175
SINTER_CACHE_DIR=/tmp/sc2 timeout 100 $B bench --backend cuda --check --no-calibrate --iters 3 --warmup 1 --scale reduced --workload matmul_softmax_100_f32,matmul_4096_f32 2>&1 | grep -E "^matmul" | cut -c1-175
SINTER_CACHE_DIR=/tmp/sc3 timeout 120 $B bench --backend cuda --mode max-autotune --check --no-calibrate --scale reduced --workload matmul_softmax_100_f32,matmul_4096_f32 2>&1 | grep -E "^matmul" | cut -c1-175
echo "== done ($SECONDS s)"
