#!/usr/bin/env bash
# Session 37, device call 3: reductions and f16/bf16 kernels written in PTX. Correctness (the
# shared suite and `device`/`device_dynamic` with PTX on and off, reduced workloads and models
# `--check`, the ONNX node suite through CUDA), then the kernels' runs, old against new.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
for v in 1 0; do
  for t in suite device device_dynamic; do
    SINTER_PTX=$v timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/PTX=$v $t: /"
  done
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' | cut -c1-150
echo "== the ONNX node suite through CUDA ($SECONDS s)"
suite=$(mktemp -d)
python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1
SINTER_CACHE_DIR=/tmp/sc_conf timeout 300 $B conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -1
echo "== runs, old / new, fresh processes ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_4096_bf16,resnet18_b32_f32
for r in 1 2; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 200 $b bench --backend cuda --workload $W --no-calibrate 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8}'
  done
done
echo "== done ($SECONDS s)"
