#!/usr/bin/env bash
# Session 37, device call 1: NVRTC's cubin against the driver's JIT of the same kernel's PTX, in
# fresh processes (first call apart), on the issue-10 workloads' full-size sources.
source scripts/device_env.sh
W=cos_16M_f32,add_relu_mul_10M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32
rm -rf /tmp/dbg; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc0 SINTER_LOG=compile SINTER_DEBUG=/tmp/dbg timeout 120 $B bench --backend cuda --workload $W --iters 5 --warmup 2 --no-calibrate 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -vE '^#|^\s*$|cache hit' | cut -c1-220
mkdir -p /tmp/src
for f in $(find /tmp/dbg -name "*.cu"); do cp $f /tmp/src/$(echo $f | sed 's|/tmp/dbg/||; s|/|_|g'); done
ls -la /tmp/src
python3 scripts/session37/jit_floor.py /tmp/src/*.cu
echo "== done ($SECONDS s)"
