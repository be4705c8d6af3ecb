#!/usr/bin/env bash
# Session 33, device call 7 (the final build). (1) The suite, device_attention's decode cases
# over every tuning. (2) The issue 10/12 table: `sinter bench --backend cuda` (one process; cold
# compiles with NVRTC's cache bypassed) beside torch_anchor.py (eager and torch.compile's default
# mode, fresh Inductor/Triton caches; torch's SDPA for the attention rows); reduce-overhead for
# the two overhead-bound workloads.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device_attention decode cases, every tuning: $(SINTER_TEST_CASES=decode timeout 100 .cudatest/device_attention 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
echo "-- check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 120 $B bench --backend cuda --workload $W --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
echo "== sinter bench ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_b timeout 240 $B bench --backend cuda --workload $W --json $OUT/sinter-cuda.json 2>&1 | grep -vE "^\s*$" | grep -v "^#   " | tail -22 | cut -c1-160
echo "== torch_anchor ($SECONDS s)"
TORCHINDUCTOR_CACHE_DIR=/tmp/ti_$$ TRITON_CACHE_DIR=/tmp/tr_$$ timeout 260 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | tail -3
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -32
echo "== reduce-overhead ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_b timeout 60 $B bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32,matmul_softmax_100_f32 --iters 200 --warmup 50 --no-calibrate 2>&1 | grep -E "^(pointwise|matmul)" | cut -c1-160
echo "== host overhead ($SECONDS s)"
timeout 100 .cudatest/device host_overhead_and_calibration --nocapture 2>&1 | grep -E "host overhead|^test result|FAILED|panicked" | head -8
echo "== done ($SECONDS s)"
