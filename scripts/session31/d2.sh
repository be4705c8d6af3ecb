#!/usr/bin/env bash
# Session 31, device call 2. (1) The tensor-core attention templates with the header-free pair
# packs (`sinter_pack_bf16x2`/`_f16x2`): device_attention's 128x128 d64 cases (bf16 and f16),
# every tuning; device_matmul's every-tuning product test. (2) Cold compiles, the build before
# (old) against this one (new: no headers, -minimal, library steps decided without loading the
# library), four rounds alternating, each a fresh process with every cache off.
source scripts/device_env.sh
echo "-- device_attention (f16 m128, every tuning): $(SINTER_TEST_CASES='f16 m128' timeout 200 .cudatest/device_attention 2>&1 | grep -E '^test result|FAILED|panicked|tunings' | head -5)"
echo "-- device_matmul products: $(timeout 120 .cudatest/device_matmul matmul_matches_the_interpreter_with_every_tuning 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
W="add_relu_mul_10M_f32 cos_16M_f32 softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32 matmul_softmax_4096_bf16 mlp_8192x4096x16384_bf16 matmul_4096_f32"
echo "-- check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 120 $B bench --backend cuda --workload $(echo $W | tr ' ' ,) --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
echo "== cold s (fresh process, every cache off), old / new, four rounds ($SECONDS s)"
for w in $W; do for r in 1 2 3 4; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=compile timeout 60 $b bench --backend cuda --workload $w --iters 10 --warmup 2 --no-calibrate > /tmp/w.log 2>&1
  echo "$w $v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -d" " -f4,8) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -m1 'cuda load' | grep -oE 'NVRTC [0-9.]+ s|plans [0-9.]+ s|other [0-9.]+ s' | tr '\n' ' ')"
done; done; done
echo "== done ($SECONDS s)"
