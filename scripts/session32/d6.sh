#!/usr/bin/env bash
# Session 32, device call 6 (the final build: tensor-core sources marked to compile alone). The
# suite; `device`'s host-overhead test (the bare executable's host time per run_device in default
# mode and through the CUDA graph, and an eight-launch program), to split bench's host_us between
# the executable and the compiled graph around it; cold compile of the tensor-core workloads.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
timeout 100 .cudatest/device host_overhead_and_calibration --nocapture 2>&1 | grep -E "host overhead|^test result|FAILED|panicked" | head -8
SINTER_CACHE_DIR=/tmp/sc_b timeout 100 $B bench --backend cuda --workload cos_16M_f32,add_relu_mul_10M_f32,matmul_softmax_4096_bf16,attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E "^(cos|add|matmul|attention)" | cut -c1-160
echo "== done ($SECONDS s)"
