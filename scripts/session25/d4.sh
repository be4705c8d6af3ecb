#!/usr/bin/env bash
# Session 25, device call 4 (issue 13): residual streams through reshapes (GPT-2's `Gemm` rows
# reshaped back) stored for cuBLASLt's C. (a) library device tests, the suite; (b) GPT-2,
# ViT-B/16, BERT-base beside torch.compile (zoo, f32 and bf16); (c) GPT-2 bf16 old (e72d2b9) and
# new alternating; (d) ViT-B/16 bf16 kernel kinds in default and max-autotune (what the tuner
# picks for the erf-GELU products).
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 150 .cudatest/device library_ --test-threads 1 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "test result|panicked" -A2 /tmp/dev.log | cut -c1-600 | head -6
timeout 240 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) zoo beside torch.compile ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 420 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,bert,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn|^\s*$" | cut -c1-220
echo "== (c) GPT-2 old/new ($SECONDS s)"
for r in 1 2; do for bin in old new; do ab_bench gpt2 bf16 $bin; done; done
echo "== (d) ViT-B/16 max-autotune ($SECONDS s)"
f=/tmp/zoo/vit_b_16/legacy/model.onnx; ins=$(for i in /tmp/zoo/vit_b_16/input_*.npy; do echo -n "--input $i "; done)
for mode in default max-autotune; do
  SINTER_CACHE_DIR=/tmp/sc_new timeout 200 $B profile --backend cuda --model $f $ins --precision bf16 --mode $mode --out /tmp/pv_$mode > /dev/null 2>&1; echo "vit $mode profile rc $?"
done
python3 - <<'PY'
import json, re, collections
def kinds(mode):
    ks = json.load(open(f"/tmp/pv_{mode}/profile.json"))["kernels"]
    c = collections.defaultdict(lambda: [0, 0.0, collections.Counter()])
    for k in ks:
        n = re.sub(r"^k\d+_", "", k["name"]); c[n][0] += 1; c[n][1] += k["stats"]["median_ns"] / 1e3; c[n][2][k["strategy"][:44]] += 1
    return c, sum(k["stats"]["median_ns"] for k in ks) / 1e3
(d, sd), (a, sa) = kinds("default"), kinds("max-autotune")
print(f"vit bf16 kernel sum default {sd:.1f} us, max-autotune {sa:.1f} us")
for k in sorted(set(d) | set(a), key=lambda k: -abs(a.get(k, [0, 0])[1] - d.get(k, [0, 0])[1]))[:8]:
    x, y = d.get(k, [0, 0, {}]), a.get(k, [0, 0, {}])
    print(f"  {k[:34]:34s} default {x[1]:7.1f} x{x[0]:3d} {dict(x[2])}\n  {'':34s} tuned   {y[1]:7.1f} x{y[0]:3d} {dict(y[2])}")
PY
echo "== done ($SECONDS s)"
