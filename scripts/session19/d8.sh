#!/usr/bin/env bash
# Session 19, device call 8 (issue 11): the KRSC permutation as a shared-memory transpose
# (render/krsc.rs), none for 1x1 filters. The convolution tests; resnet18_b32_f32 checked,
# profiled and timed beside torch.compile; the exported ResNet-18 at batch 8.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
R=resnet18_b32_f32
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test result|FAILED|panicked" /tmp/impl.log | head -6
timeout 60 $B bench --backend cuda --workload $R --scale reduced --check --no-calibrate 2>&1 | grep -E "^$R|check" | head -3
echo "== (b) resnet18 ($SECONDS s)"
timeout 120 $B profile --backend cuda --workload $R --out /tmp/pd > /dev/null 2>&1; echo "profile rc $?"
python3 -c "
import json; p=json.load(open('/tmp/pd/profile.json')); ks=p['kernels']
print(round(sum(k['stats']['median_ns'] for k in ks)/1e3,1), 'us of kernels')
print(' '.join(f\"{k['name'].split('_')[0]}={k['stats']['median_ns']/1e3:.1f}\" for k in ks))"
for i in 1 2 3; do timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R"; done
timeout 150 python3 .bench/torch_anchor.py --only $R --modes eager,default --out $OUT/r18-torch.json 2>&1 | grep -E "^$R"
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed "s/^/again /"
echo "== (c) exported ResNet-18, batch 8 ($SECONDS s)"
timeout 200 python3 onnx/models/zoo_check.py --bin $B --models resnet18 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | grep -E "^resnet18 +legacy +dynamic"
for i in 1 2; do timeout 60 $B bench --backend cuda --model /tmp/zoo/resnet18/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/resnet18 /"; done
cp /tmp/impl.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
