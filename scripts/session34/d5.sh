#!/usr/bin/env bash
# Session 34, device call 5 (the reduction block change: rows of more than 16 elements a thread at
# 256 threads take 512). (1) The suite; every workload at reduced size against the reference.
# (2) softmax_8192x8192_f32 old (session start) / new, alternating, three rounds: run (flushed)
# and cold compile (NVRTC's cache bypassed). (3) The issue 10/12 table as session 33's call 7.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
echo "-- check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 120 $B bench --backend cuda --workload $W --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
echo "-- softmax full size --check: $(SINTER_CACHE_DIR=/tmp/sc_c timeout 120 $B bench --backend cuda --workload softmax_8192x8192_f32 --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | tr '\n' ' ')"
echo "== (2) softmax old / new ($SECONDS s)"
for r in 1 2 3; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  echo -n "$r $v "; SINTER_CACHE_DIR=/tmp/sc_sm_$v$r timeout 60 $b bench --backend cuda --workload softmax_8192x8192_f32 --no-calibrate 2>&1 | grep -E "^softmax" | cut -c1-110
done; done
echo "== (3) sinter bench ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_b timeout 240 $B bench --backend cuda --workload $W --json $OUT/sinter-cuda.json 2>&1 | grep -vE "^\s*$" | grep -v "^#   " | tail -22 | cut -c1-160
echo "== torch_anchor ($SECONDS s)"
TORCHINDUCTOR_CACHE_DIR=/tmp/ti_$$ TRITON_CACHE_DIR=/tmp/tr_$$ timeout 260 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | tail -3
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -32
echo "== reduce-overhead ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_b timeout 60 $B bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32,matmul_softmax_100_f32 --iters 200 --warmup 50 --no-calibrate 2>&1 | grep -E "^(pointwise|matmul)" | cut -c1-160
echo "== done ($SECONDS s)"
