#!/usr/bin/env bash
# Session 19, device call 5 (issue 11): what bounds ResNet-18's stem on the own implicit-GEMM
# template (174 us for 7.55 GFLOP and 123 MB): ncu's throughput, instruction and stall sections
# for that one kernel.
source scripts/device_env.sh
timeout 300 ncu --kernel-name regex:"k0_conv2d" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats --section Occupancy --section LaunchStats $B bench --backend cuda --workload resnet18_b32_f32 --no-calibrate > /tmp/stem.log 2>&1; echo "ncu rc $?"
cp /tmp/stem.log $OUT/
grep -vE "^==PROF==|^\s*$|^resnet|^#" /tmp/stem.log | grep -e "----" -e "[0-9]" | cut -c1-150 | head -150
timeout 120 $B profile --backend cuda --workload resnet18_b32_f32 --out /tmp/pd > /dev/null 2>&1
sed -n 1,400p /tmp/pd/kernels/k0_conv2d_batch_norm_relu.cu > $OUT/stem.cu
echo "== done ($SECONDS s)"
