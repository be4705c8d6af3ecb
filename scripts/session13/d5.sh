#!/usr/bin/env bash
# Session 13, device call 5 (issue 10): sin/cos quadrant by the 1.5 * 2^23 shift, and the unit
# polynomial for a sin/cos whose argument is bounded in [-1, 1] (cos(cos(x))). The CUDA suite,
# device_implicit (its TF32 layout test kept off the skinny library rule), the trig workloads
# checked at reduced size, then timed beside torch.compile in the same call.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
$B bench --backend cuda --no-calibrate --workload add_relu_mul_10M_f32 --iters 3 --warmup 1 > /dev/null 2>&1
timeout 150 .cudatest/suite --test-threads 1 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "test result|FAILED|panicked" /tmp/suite.log | head -8
timeout 120 .cudatest/device_implicit --test-threads 1 > /tmp/impl.log 2>&1; echo "implicit rc $?"; grep -E "test result|FAILED|panicked" -A2 /tmp/impl.log | head -6
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,layernorm_gelu_8192x4096_f32,pointwise_chain64_1024_f32
timeout 120 $B bench --backend cuda --no-calibrate --workload cos_16M_f32,cos_cos_16M_f32,pointwise_chain64_1024_f32 --scale reduced --check --iters 3 --warmup 1 2>&1 | tail -5
$B calibrate --backend cuda --no-matmul 2>&1 | tail -3
$B bench --backend cuda --no-calibrate --workload $W --json $OUT/sinter.json 2>&1 | tail -7
TORCHINDUCTOR_CACHE_DIR=/tmp/ind_fresh TRITON_CACHE_DIR=/tmp/tri_fresh PYTHONUNBUFFERED=1 timeout 200 python3 .bench/torch_anchor.py \
  --modes eager,default --only $W --out $OUT/torch.json > $OUT/torch.log 2>&1; echo "torch rc $?"
python3 .bench/compare.py $OUT/torch.json $OUT/sinter.json 2>&1 | tee $OUT/compare.txt
python3 -c "import json; [print('torch', r['name'], r['mode'], 'ms', round(r['ms'],4), 'cold_compile_s', round(r.get('cold_compile_s') or 0,3)) for r in json.load(open('$OUT/torch.json'))['results'] if r['mode'] != 'eager']"
