#!/usr/bin/env bash
# Session 13, device call 6 (issue 10): where sum_64M_f32 (81% of copy) and the 16-byte pointwise
# kernels (84%) lose to the copy ceiling: per-kernel times (sinter profile) and every candidate
# max-autotune times (SINTER_LOG=autotune), beside the default's bench figure.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
$B calibrate --backend cuda --no-matmul 2>&1 | tail -3
W=sum_64M_f32,add_relu_mul_10M_f32,cos_16M_f32
$B bench --backend cuda --no-calibrate --workload $W --iters 50 2>&1 | tail -4
for w in sum_64M_f32 add_relu_mul_10M_f32; do
  timeout 60 $B profile --backend cuda --workload $w --out /tmp/p_$w > /dev/null 2>&1; echo "profile $w rc $?"
  python3 scripts/session9/top.py /tmp/p_$w 4 2>&1 | tail -5
done
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --no-calibrate --mode max-autotune --workload $W --iters 50 > /tmp/at.log 2>&1; echo "rc $?"
tail -4 /tmp/at.log
grep -E "ns$|chose" /tmp/at.log | sed 's/Tuning { //; s/, mma: None, library: None, attn: None//; s/tile: None, //' | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-200 | head -80
