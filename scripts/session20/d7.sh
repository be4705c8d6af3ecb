#!/usr/bin/env bash
# Session 20, device call 7 (issues 10, 13): rows a warp's registers hold on one warp each. The
# CUDA shared suite (its norm cases now include 400 x 1023 and 1568 x 384) and the device tests;
# ConvNeXt-Tiny's kernels (sinter profile) and ConvNeXt-Tiny and ViT-B/16 beside torch.compile in
# f32 and bf16; the memory-bound norm workloads, whose rows are longer and stay on a block each.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
echo "== (a) tests ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models convnext_tiny,vit_b_16 --work /tmp/zoo --keep --exporters legacy --batch 8 --base --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|PASS +err|warn" | cut -c1-300
f=/tmp/zoo/convnext_tiny/legacy/model.onnx
timeout 90 $B profile --backend cuda --model $f --dim batch=8 --out /tmp/pc > /dev/null 2>&1; echo "profile rc $?"
python3 - <<'PY'
import json, re, collections
ks = json.load(open('/tmp/pc/profile.json'))['kernels']
g = collections.defaultdict(lambda: [0, 0.0])
for k in ks:
    n = re.sub(r'^k\d+_', '', k['name']); t = k['stats']['median_ns'] / 1e3
    kind = 'matmul' if 'matmul' in n else n
    g[kind][0] += 1; g[kind][1] += t
print(f"{len(ks)} kernels, {sum(v[1] for v in g.values()):.1f} us")
for kk, (c, t) in sorted(g.items(), key=lambda x: -x[1][1]): print(f"{t:8.1f} us x{c:3d} {kk}")
for k in ks:
    if 'layernorm' in k['name'] or 'mul_add_etc' in k['name']:
        print(f"   {k['name'][:36]:36s} {k['stats']['median_ns']/1e3:6.1f} us {k['strategy']}")
PY
echo "== (c) workloads ($SECONDS s)"
timeout 120 $B bench --backend cuda --workload softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32 --no-calibrate 2>&1 | grep -E "^(softmax|layernorm)"
echo "== done ($SECONDS s)"
