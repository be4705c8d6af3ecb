#!/usr/bin/env bash
# Session 25, device call 1 (issue 13): cuBLASLt's GELU epilogue (tanh form) and autocast's f32
# biases and residuals on 16-bit products, direct instead of split. (a) the new library device
# test (its error figures printed), the older one, the shared suite and its products on the
# library; (b) the zoo's GPT-2, ViT-B/16 and BERT-base exported and checked (bf16 and f32), then
# old (e72d2b9) and new alternating in `bench`; (c) kernel kinds of GPT-2 and ViT bf16, both builds.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 150 .cudatest/device library_ --test-threads 1 --nocapture > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "gelu|autocast|test result|panicked|^test " /tmp/dev.log | head -30
SINTER_CUDA_LIBRARY=force timeout 100 .cudatest/suite matmul --test-threads 2 > /tmp/suitef.log 2>&1; echo "suite (forced library) rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suitef.log | head -4
timeout 240 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 420 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16,bert --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -vE "this process|done in|warn" | cut -c1-220
for m in gpt2 vit_b_16 bert; do for r in 1 2; do for bin in old new; do ab_bench $m bf16 $bin; done; done; done
for r in 1 2; do for bin in old new; do ab_bench gpt2 f32 $bin; done; done
echo "== (c) kernel kinds ($SECONDS s)"
for m in gpt2 vit_b_16; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for bin in old new; do
    b=$B; [ $bin = old ] && b=$OLD
    SINTER_CACHE_DIR=/tmp/sc_$bin timeout 60 $b profile --backend cuda --model $f $ins --precision bf16 --out /tmp/p_${m}_$bin > /dev/null 2>&1; echo "$m $bin profile rc $?"
  done
  M=$m python3 - <<'PY'
import json, re, collections, os
m = os.environ["M"]
def kinds(b):
    ks = json.load(open(f"/tmp/p_{m}_{b}/profile.json"))["kernels"]
    d = collections.defaultdict(lambda: [0, 0.0, ""])
    for k in ks:
        n = re.sub(r"^k\d+_", "", k["name"]); d[n][0] += 1; d[n][1] += k["stats"]["median_ns"] / 1e3; d[n][2] = k["strategy"][:24]
    return d, sum(k["stats"]["median_ns"] for k in ks) / 1e3, len(ks)
(o, so, no), (n, sn, nn) = kinds("old"), kinds("new")
print(f"{m}: kernel sum old {so:.1f} us ({no} kernels), new {sn:.1f} us ({nn} kernels)")
for k in sorted(set(o) | set(n), key=lambda k: -abs(n.get(k, [0, 0, ""])[1] - o.get(k, [0, 0, ""])[1]))[:10]:
    a, b = o.get(k, [0, 0, ""]), n.get(k, [0, 0, ""])
    print(f"  {k[:40]:40s} old {a[1]:7.1f} x{a[0]:3d} {a[2]:24s} new {b[1]:7.1f} x{b[0]:3d} {b[2]}")
PY
done
echo "== done ($SECONDS s)"
