#!/usr/bin/env bash
# Session 18, device call 7 (issue 11): constant weights of channels-last cuDNN convolutions permuted to KRSC;
# the convolution tests (the constant-weight chain among them), then resnet18_b32_f32 profiled,
# checked at reduced scale, and timed (default, max-autotune) beside torch.compile.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
R=resnet18_b32_f32
echo "== (a) convolution tests ($SECONDS s)"
timeout 150 .cudatest/device --test-threads=2 > /tmp/dev.log 2>&1; echo "device rc $?"; grep -E "^test result|FAILED|panicked" /tmp/dev.log | head -4
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test |^test result|FAILED|panicked" /tmp/impl.log | head -12
echo "== (b) resnet18 ($SECONDS s)"
timeout 60 $B bench --backend cuda --workload $R --scale reduced --check --no-calibrate 2>&1 | grep -E "^$R|check" | head -3
timeout 120 $B profile --backend cuda --workload $R --out /tmp/pd > /dev/null 2>&1; echo "profile default rc $?"; python3 scripts/profile_top.py /tmp/pd/profile.json 6
timeout 60 $B bench --backend cuda --workload $R --no-calibrate --json $OUT/r18.json 2>&1 | grep -E "^$R"
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate --json $OUT/r18-mat.json > /tmp/mat.log 2>&1; grep -E "^$R" /tmp/mat.log
sed 's/\x1b\[[0-9;]*m//g' /tmp/mat.log | grep -E "k0_conv2d" | sed -E 's/[a-z_]+: None,? ?//g' | cut -c1-230 | head -24
timeout 150 python3 .bench/torch_anchor.py --only $R --modes eager,default --out $OUT/r18-torch.json 2>&1 | grep -E "^$R"
cp /tmp/impl.log /tmp/mat.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
