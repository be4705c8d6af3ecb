#!/usr/bin/env bash
# Session 19, device call 7 (issues 11, 13): the two-stage stem tile as the default. The
# convolution tests; resnet18_b32_f32 checked and timed beside torch.compile (default and
# max-autotune); the exported ResNet-18 and -50 at batch 8.
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
print(sum(k['stats']['median_ns'] for k in ks)/1e3, 'us of kernels;', [(k['name'][:20], round(k['stats']['median_ns']/1e3,1), k['strategy']) for k in ks[:2]])"
for i in 1 2 3; do timeout 60 $B bench --backend cuda --workload $R --no-calibrate --json $OUT/r18-$i.json 2>&1 | grep -E "^$R"; done
timeout 150 python3 .bench/torch_anchor.py --only $R --modes eager,default --out $OUT/r18-torch.json 2>&1 | grep -E "^$R"
timeout 200 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate 2>&1 | grep -E "^$R"
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed "s/^/again /"
echo "== (c) exported ResNet-18 and -50, batch 8 ($SECONDS s)"
timeout 300 python3 onnx/models/zoo_check.py --bin $B --models resnet18,resnet50 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | grep -E "^resnet(18|50) +legacy +dynamic"
for m in resnet18 resnet50; do for i in 1 2; do
  timeout 60 $B bench --backend cuda --model /tmp/zoo/$m/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/$m /"
done; done
cp /tmp/impl.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
