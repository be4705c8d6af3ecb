#!/usr/bin/env bash
# Session 19, device call 3 (issue 11): shortcut convolutions stored channels-last, the KRSC
# permutation in whole-sector stores. Tests; resnet18_b32_f32's kernels under ncu (as call 2);
# resnet18 timed beside torch.compile (default, max-autotune); the exported ResNet-18 and -50.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
R=resnet18_b32_f32
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test result|FAILED|panicked" /tmp/impl.log | head -6
timeout 200 .cudatest/suite --test-threads=4 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
timeout 60 $B bench --backend cuda --workload $R --scale reduced --check --no-calibrate 2>&1 | grep -E "^$R|check" | head -3
echo "== (b) resnet18's kernels under ncu ($SECONDS s)"
timeout 300 ncu --metrics gpu__time_duration.sum --kernel-name regex:"xmma|cutlass|implicit|sm90|sm80|conv|krsc|epilogue|pool" --launch-skip 300 --launch-count 70 $B bench --backend cuda --workload $R --no-calibrate > /tmp/ncu.log 2>&1; echo "ncu rc $?"
grep -E "^  [a-zA-Z_]|gpu__time_duration" /tmp/ncu.log | paste - - | awk '{printf "%s ... %s %s\n", substr($1,1,90), $(NF-1), $NF}' | head -72
echo "== (c) resnet18 beside torch ($SECONDS s)"
for i in 1 2 3; do timeout 60 $B bench --backend cuda --workload $R --no-calibrate --json $OUT/r18-$i.json 2>&1 | grep -E "^$R"; done
timeout 150 python3 .bench/torch_anchor.py --only $R --modes eager,default --out $OUT/r18-torch.json 2>&1 | grep -E "^$R"
timeout 200 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate --json $OUT/r18-mat.json 2>&1 | grep -E "^$R"
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed "s/^/again /"
echo "== (d) exported ResNet-18 and -50, batch 8 ($SECONDS s)"
timeout 300 python3 onnx/models/zoo_check.py --bin $B --models resnet18,resnet50 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | grep -E "^resnet(18|50) +legacy +dynamic"
for m in resnet18 resnet50; do for i in 1 2; do
  timeout 60 $B bench --backend cuda --model /tmp/zoo/$m/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/$m /"
done; done
cp /tmp/impl.log /tmp/ncu.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
