#!/usr/bin/env bash
# Session 19, device call 6 (issue 11): two-stage tiles for implicit-GEMM convolutions among
# max-autotune's candidates; every candidate of ResNet-18's stem timed (SINTER_LOG=autotune).
source scripts/device_env.sh
R=resnet18_b32_f32
SINTER_LOG=autotune timeout 300 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate > /tmp/mat.log 2>&1; grep -E "^$R" /tmp/mat.log
sed 's/\x1b\[[0-9;]*m//g' /tmp/mat.log | grep -E "k0_conv2d" | grep -E "mma: Some|library|chose" | sed -E 's/[a-z_]+: None,? ?//g' | cut -c1-200 | head -30
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R"
cp /tmp/mat.log $OUT/
echo "== done ($SECONDS s)"
