#!/usr/bin/env bash
# Session 13, device call 7 (issue 10): the memory-bound workloads beside torch.compile, torch's
# anchor run twice in the call (call 5's torch.compile figures ran slower than its eager), sinter
# bench between them.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32
PYTHONUNBUFFERED=1 timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only $W --out $OUT/torch1.json > $OUT/torch1.log 2>&1; echo "torch 1 rc $?"
$B calibrate --backend cuda --no-matmul 2>&1 | grep copy
$B bench --backend cuda --no-calibrate --workload $W --json $OUT/sinter.json 2>&1 | tail -6
PYTHONUNBUFFERED=1 timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only $W --out $OUT/torch2.json > $OUT/torch2.log 2>&1; echo "torch 2 rc $?"
python3 .bench/compare.py $OUT/torch1.json $OUT/sinter.json 2>&1 | tail -7
python3 .bench/compare.py $OUT/torch2.json $OUT/sinter.json 2>&1 | tail -7
