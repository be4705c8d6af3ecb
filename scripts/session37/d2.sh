#!/usr/bin/env bash
# Session 37, device call 2: pointwise kernels written in PTX (no NVRTC). Correctness first (the
# shared suite and `device` with PTX on and off, the reduced workloads `--check`, the ONNX node
# suite through CUDA), then cold compiles and runs, old (session start) against new, each a
# fresh process with every cache off, alternating.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
timeout 90 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -5
SINTER_PTX=0 timeout 90 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | sed 's/^/PTX off: /' | head -3
timeout 120 .cudatest/device 2>&1 | grep -E "test result|FAILED|panicked" | head -5
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,pointwise_chain64_1024_f32
SINTER_CACHE_DIR=/tmp/sc_chk timeout 120 $B bench --backend cuda --scale reduced --check --workload $W,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32 --iters 3 --warmup 1 --no-calibrate 2>&1 | grep -vE '^#|^\s*$' | cut -c1-140
echo "== cold compiles, fresh processes, every cache off ($SECONDS s)"
for r in 1 2 3; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 120 $b bench --backend cuda --workload $W --no-calibrate 2>&1 | grep -E "^(add|cos|point)" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8" warm "$9}'
  done
done
echo "== warm start with the driver's JIT cache on ($SECONDS s)"
rm -rf /tmp/sc_w /tmp/nvcache; export CUDA_CACHE_PATH=/tmp/nvcache
for r in 1 2; do SINTER_CACHE_DIR=/tmp/sc_w timeout 60 $B bench --backend cuda --workload cos_16M_f32 --no-calibrate 2>&1 | grep -E "^cos" | awk -v r=$r '{print r" cos cold "$8" warm "$9}'; done
unset CUDA_CACHE_PATH
echo "== the ONNX node suite through CUDA ($SECONDS s)"
suite=$(mktemp -d)
python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1; echo "suite rc $? ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_conf timeout 300 $B conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -3
echo "== done ($SECONDS s)"
