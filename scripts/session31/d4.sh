#!/usr/bin/env bash
# Session 31, device call 4: the final build (the pair packs without their sm_75 fallback): the
# suite, the bf16/f16 tensor-core attention tunings (device_attention's 128 x 128 d64 cases), the
# library tests with and without the libraries, the issue-10 workloads at reduced size checked.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device_attention (f16 m128, every tuning): $(SINTER_TEST_CASES='f16 m128' timeout 150 .cudatest/device_attention 2>&1 | grep -E '^test result|FAILED|panicked|tunings|failures' | head -6)"
echo "-- device library tests: $(timeout 100 .cudatest/device library 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- the same without the libraries: $(SINTER_CUDA_LIBRARY=0 timeout 100 .cudatest/device library 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
W=add_relu_mul_10M_f32,cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_4096_bf16,mlp_8192x4096x16384_bf16,matmul_4096_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
echo "-- check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 120 $B bench --backend cuda --workload $W --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
echo "== done ($SECONDS s)"
