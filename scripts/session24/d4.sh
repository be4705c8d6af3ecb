#!/usr/bin/env bash
# Session 24, device call 4 (issue 13): integer powers lowered to products (`decompose`: GPT-2's
# exported GELU `pow(x, 3.0)` made its split epilogue compute-bound, 17.7 us). (a) the shared
# suite and the library device test; (b) GPT-2 small beside torch.compile (zoo, f32 and bf16),
# then before (aca0268) and after alternating; (c) ConvNeXt-Tiny bf16 (+1.4% in call 3) profiled
# with both builds, kernel kinds side by side.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
timeout 120 .cudatest/device library_residuals --test-threads 1 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "test result|panicked" /tmp/dev.log | head -3
echo "== (b) GPT-2 ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn" | cut -c1-300
for p in bf16 f32; do for r in 1 2; do for bin in old new; do ab_bench gpt2 $p $bin; done; done; done
echo "== (c) ConvNeXt-Tiny bf16 ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 150 python3 onnx/models/zoo_check.py \
  --bin "$B" --models convnext_tiny --base --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing --iters 3 2>&1 | grep -E "PASS|FAIL" | cut -c1-160
for r in 1 2; do for bin in old new; do ab_bench convnext_tiny bf16 $bin; done; done
f=/tmp/zoo/convnext_tiny/legacy/model.onnx; ins=$(for i in /tmp/zoo/convnext_tiny/input_*.npy; do echo -n "--input $i "; done)
for bin in old new; do
  b=$B; [ $bin = old ] && b=$OLD
  SINTER_CACHE_DIR=/tmp/sc_$bin timeout 60 $b profile --backend cuda --model $f $ins --precision bf16 --out /tmp/pc_$bin > /dev/null 2>&1; echo "$bin profile rc $?"
  cp /tmp/pc_$bin/profile.json $OUT/convnext_bf16_$bin.json
done
python3 - <<'PY'
import json, re, collections
def kinds(b):
    ks = json.load(open(f"/tmp/pc_{b}/profile.json"))["kernels"]
    d = collections.defaultdict(lambda: [0, 0.0])
    for k in ks:
        n = re.sub(r"^k\d+_", "", k["name"]); d[n][0] += 1; d[n][1] += k["stats"]["median_ns"] / 1e3
    return d, sum(k["stats"]["median_ns"] for k in ks) / 1e3
(o, so), (n, sn) = kinds("old"), kinds("new")
print(f"kernel sum old {so:.1f} us, new {sn:.1f} us")
for k in sorted(set(o) | set(n), key=lambda k: -abs(n.get(k, [0, 0])[1] - o.get(k, [0, 0])[1]))[:12]:
    print(f"{k[:50]:50s} old {o.get(k,[0,0])[1]:8.1f} x{o.get(k,[0,0])[0]:3d}  new {n.get(k,[0,0])[1]:8.1f} x{n.get(k,[0,0])[0]:3d}")
PY
echo "== done ($SECONDS s)"
