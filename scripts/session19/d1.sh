#!/usr/bin/env bash
# Session 19, device call 1 (issues 11, 13): KRSC filters for every channels-last cuDNN convolution
# (permuted before each run when the weight is an input; once at load when a constant, one plan),
# and the max pool between ResNet's stem and first block stored channels-last, walked in storage
# order. The convolution tests, resnet18_b32_f32 checked, profiled and timed beside torch.compile
# (KRSC on and off), then the exported ResNet-18 at batch 8 (warm start: one cuDNN plan).
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
R=resnet18_b32_f32
echo "== (a) convolution tests ($SECONDS s)"
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test |^test result|FAILED|panicked" /tmp/impl.log | head -12
timeout 150 .cudatest/device --test-threads=2 > /tmp/dev.log 2>&1; echo "device rc $?"; grep -E "^test result|FAILED|panicked" /tmp/dev.log | head -4
echo "== (b) resnet18 ($SECONDS s)"
timeout 60 $B bench --backend cuda --workload $R --scale reduced --check --no-calibrate 2>&1 | grep -E "^$R|check" | head -3
timeout 120 $B profile --backend cuda --workload $R --out /tmp/pd > /dev/null 2>&1; echo "profile default rc $?"; python3 scripts/profile_top.py /tmp/pd/profile.json
for krsc in 1 0 1 0; do
  SINTER_CUDNN_KRSC=$krsc timeout 60 $B bench --backend cuda --workload $R --no-calibrate --json $OUT/r18-k$krsc.json 2>&1 | grep -E "^$R" | sed "s/^/krsc=$krsc /"
done
timeout 150 python3 .bench/torch_anchor.py --only $R --modes eager,default --out $OUT/r18-torch.json 2>&1 | grep -E "^$R"
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate --json $OUT/r18-mat.json > /tmp/mat.log 2>&1; grep -E "^$R" /tmp/mat.log
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed "s/^/again /"
echo "== (c) exported ResNet-18, batch 8 ($SECONDS s)"
timeout 200 python3 onnx/models/zoo_check.py --bin $PWD/$B --models resnet18 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | grep -E "^resnet18 +legacy +dynamic"
for krsc in 1 0 1 0; do
  SINTER_CUDNN_KRSC=$krsc timeout 60 $B bench --backend cuda --model /tmp/zoo/resnet18/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/resnet18 krsc=$krsc /"
done
cp /tmp/impl.log /tmp/mat.log /tmp/pd/profile.json $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
