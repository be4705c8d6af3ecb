#!/usr/bin/env bash
# Session 36, device call 9: the tensor-core matmul epilogue's 16-byte stores (quad exchange,
# whole tiles of 16-bit outputs). Correctness: every tuning of whole-tile products (device_matmul),
# the implicit-GEMM convolutions (device_implicit), the shared suite, `bench --check` at reduced
# size. Timing: `bench` old (session start) / new alternating, torch between.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
timeout 170 .cudatest/device_matmul whole_tile_products 2>&1 | grep -E "test result|FAILED|panicked" | head -5
timeout 150 .cudatest/device_implicit 2>&1 | grep -E "test result|FAILED|panicked" | head -5
timeout 60 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -3
W=mlp_8192x4096x16384_bf16,matmul_softmax_4096_bf16,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16
echo "check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 120 $B bench --backend cuda --workload $W --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
echo "== timing ($SECONDS s)"
for r in 1 2; do
  SINTER_CACHE_DIR=/tmp/sc_old timeout 120 $OLD bench --backend cuda --workload $W --no-calibrate 2>&1 | grep -E "^(attention|mlp|matmul)" | awk -v r=$r '{print r" old "$1" "$4}'
  SINTER_CACHE_DIR=/tmp/sc_new timeout 120 $B bench --backend cuda --workload $W --no-calibrate --json $OUT/new_$r.json 2>&1 | grep -E "^(attention|mlp|matmul)" | awk -v r=$r '{print r" new "$1" "$4}'
  [ $r = 1 ] && timeout 200 python3 .bench/torch_anchor.py --modes eager,default --only mlp_8192x4096x16384_bf16,matmul_softmax_4096_bf16,attention_b8h16s1024d64_bf16,sdpa_flash_b8h16s1024d64_bf16 --out $OUT/torch.json 2>&1 | grep -vE "^\s*$" | tail -9
done
python3 .bench/compare.py $OUT/torch.json $OUT/new_1.json $OUT/new_2.json 2>&1 | tail -8
echo "== done ($SECONDS s)"
