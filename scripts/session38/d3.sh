#!/usr/bin/env bash
# Session 38, device call 3 (the final build): correctness, then issue 10's cold-compile table:
# old (the session's start, f3c944d) / new, fresh processes with every cache off, beside
# torch.compile's cold compiles in the same call; last, max-autotune over the f32 product's tiles.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
for t in suite device device_dynamic; do
  timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/$t: /"
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' > /tmp/reduced.txt
grep -vc "check ok" /tmp/reduced.txt | sed 's/^/reduced: lines without check ok (the header): /'
echo "== run and cold, old (session start) / new ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,pointwise_chain64_1024_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16
for r in 1 2; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 200 $b bench --backend cuda --workload $W --no-calibrate --json $OUT/$v$r.json 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8}'
  done
done
echo "== torch ($SECONDS s)"
timeout 300 python3 .bench/torch_anchor.py --modes eager,default --only $W --out $OUT/torch.json 2>&1 | grep -E " default " | cut -c1-110
python3 .bench/compare.py $OUT/torch.json $OUT/new2.json 2>&1 | tail -12
echo "== max-autotune over the product's tiles (PTX one-step candidates among them) ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_tune timeout 200 $B bench --backend cuda --mode max-autotune --check --no-calibrate --workload matmul_softmax_100_f32,matmul_4096_f32 --scale reduced 2>&1 | grep -E "^matmul" | cut -c1-175
echo "== done ($SECONDS s)"
