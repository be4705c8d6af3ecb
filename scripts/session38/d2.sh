#!/usr/bin/env bash
# Session 38, device call 2: the CUDA-core product's one-step form in PTX (ptx/matmul.rs) and erf
# by one module function where a kernel evaluates it at more than four values a thread.
# Correctness (the shared suite, the device tests, every reduced workload and the full-size erf
# and product workloads `--check`, the ONNX node suite), then old (call 1's build) / new, fresh
# processes with every cache off, the load's own split, and torch.compile's cold compiles.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
for t in suite device device_matmul device_dynamic device_implicit; do
  timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/$t: /"
done
SINTER_PTX=0 timeout 150 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -3 | sed "s/^/suite, PTX off: /"
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' > /tmp/reduced.txt
grep -vc "check ok" /tmp/reduced.txt | sed 's/^/reduced: lines without check ok (the header): /'
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --check --no-calibrate --iters 3 --warmup 1 --workload layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32,matmul_4096_f32 2>&1 | grep -E "^(layer|matmul)" | cut -c1-175
echo "== run and cold, old (call 1) / new ($SECONDS s)"
W=layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32,softmax_8192x8192_f32
for r in 1 2 3; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 200 $b bench --backend cuda --workload $W --no-calibrate 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8}'
  done
done
echo "== the load's split, new ($SECONDS s)"
for w in layernorm_gelu_8192x4096_f32 matmul_softmax_100_f32; do
  rm -rf /tmp/sc_l; CUDA_CACHE_DISABLE=1 SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_l timeout 100 $B bench --backend cuda --workload $w --no-calibrate --iters 5 2>&1 | grep -iE "PTX modules|^$w" | cut -c1-400
done
echo "== the ONNX node suite through CUDA ($SECONDS s)"
suite=$(mktemp -d)
python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1
SINTER_CACHE_DIR=/tmp/sc_conf timeout 300 $B conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -1
echo "== torch ($SECONDS s)"
timeout 300 python3 .bench/torch_anchor.py --modes eager,default --only softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32 --out /tmp/torch.json 2>&1 | grep -E "default|eager" | cut -c1-120
echo "== done ($SECONDS s)"
