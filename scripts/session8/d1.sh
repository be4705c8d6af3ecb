#!/usr/bin/env bash
# Session 8, device call 1 (issue 10's pointwise targets, issue 14's differential fuzzing):
# f32 sin/cos with libdevice's slow path out of line, and two 16-byte groups per thread in large
# pointwise kernels. The CUDA shared suite and device tests first (poisoned outputs, every op),
# then torch_anchor.py and sinter bench on the memory- and overhead-bound workloads in one call,
# max-autotune's group candidates, and the differential fuzzer on CUDA.
# Expects .bench/sinter, .bench/fuzz_backends, .bench/torch_anchor.py, .bench/compare.py and the
# test executables in .cudatest/ (carried); run from the repository root with OUT set.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for t in suite device device_dynamic; do
  timeout 150 .cudatest/$t --test-threads 1 > "$OUT/$t.log" 2>&1; echo "$t rc=$? $(grep -E '^test result' "$OUT/$t.log" | tail -1)"
  grep -E "FAILED|panicked" -A3 "$OUT/$t.log" | head -8
done
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,pointwise_chain64_1024_f32,matmul_softmax_100_f32
PYTHONUNBUFFERED=1 timeout 200 python3 .bench/torch_anchor.py --modes eager,default,reduce-overhead --only $W --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; echo "torch rc=$?"; tail -2 "$OUT/torch.log"
$BIN bench --backend cuda --workload $W,sum_64M_f32 --json "$OUT/sinter.json" 2>&1 | grep -vE '^#   ' | cut -c1-220
$BIN bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32,matmul_softmax_100_f32,add_relu_mul_10M_f32 --json "$OUT/sinter-ro.json" 2>&1 | grep -vE '^#' | cut -c1-220
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json" "$OUT/sinter-ro.json" | tee "$OUT/compare.txt"
SINTER_LOG=autotune $BIN bench --backend cuda --mode max-autotune --workload add_relu_mul_10M_f32,cos_16M_f32,pointwise_chain64_1024_f32 --json "$OUT/sinter-ma.json" > "$OUT/ma.log" 2>&1
grep -E "^(add|cos|point)" "$OUT/ma.log" | cut -c1-200; grep -iE "winner|best" "$OUT/ma.log" | head -6; grep -E " g[24] | x4 block" "$OUT/ma.log" | head -24 | cut -c1-160
timeout 60 .bench/fuzz_backends --seconds 45 --seed 8 2>&1 | tail -4
