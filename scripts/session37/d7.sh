#!/usr/bin/env bash
# Session 37, device call 7: the final build (16-bit PTX constants at their dtype): the shared
# suite, `device`, `device_dynamic`, every reduced workload `--check`, and the PTX workloads' runs
# and cold compiles once.
source scripts/device_env.sh
for t in suite device device_dynamic; do
  timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/$t: /"
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' | grep -v "check ok" | cut -c1-150
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_4096_bf16,pointwise_chain64_1024_f32
rm -rf /tmp/sc_n; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_n timeout 100 $B bench --backend cuda --workload $W --no-calibrate 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk '{print $1" ms "$4" cold "$8}'
echo "== done ($SECONDS s)"
