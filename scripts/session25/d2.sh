#!/usr/bin/env bash
# Session 25, device call 2 (issue 13): (a) the library device tests again (a heuristic's
# NOT_SUPPORTED now falls back to the split form; the split form's source says why it is not
# direct); (b) the zoo's GPT-2, ViT-B/16, BERT-base: every split library product's reason
# (bf16), GPT-2 f32 kinds old and new, max-autotune against default for ViT and BERT in bf16.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 150 .cudatest/device library_ --test-threads 1 --nocapture > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "gelu|autocast|test result|^test |split, cuBLASLt" /tmp/dev.log | cut -c1-300 | head -30
grep -A3 "panicked" /tmp/dev.log | cut -c1-1500 | head -24
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16,bert --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|vit_b_16|bert) " | cut -c1-160
prof() {  # prof MODEL PRECISION old|new: profile into /tmp/p_MODEL_PRECISION_BIN
  local f=/tmp/zoo/$1/legacy/model.onnx b=$B; [ "$3" = old ] && b=$OLD
  local ins=$(for i in /tmp/zoo/$1/input_*.npy; do echo -n "--input $i "; done)
  SINTER_CACHE_DIR=/tmp/sc_$3 timeout 90 $b profile --backend cuda --model $f $ins --precision $2 --out /tmp/p_$1_$2_$3 > /dev/null 2>&1; echo "$1 $2 $3 profile rc $?"
}
for m in gpt2 vit_b_16 bert; do prof $m bf16 new; done
prof gpt2 f32 old; prof gpt2 f32 new
python3 - <<'PY'
import json, re, collections, os
def load(d):
    return json.load(open(f"{d}/profile.json"))["kernels"]
for m in ["gpt2", "vit_b_16", "bert"]:
    d = f"/tmp/p_{m}_bf16_new"; ks = load(d)
    print(f"{m} bf16: {len(ks)} kernels, sum {sum(k['stats']['median_ns'] for k in ks)/1e3:.1f} us")
    why = collections.Counter(); t = collections.Counter()
    for k in ks:
        if "split" not in k["strategy"] or "cublaslt" not in k["strategy"]: continue
        sp = os.path.join(d, k.get("source_path") or "-")
        src = open(sp).read() if os.path.exists(sp) else ""
        r = re.search(r"not a library epilogue: (.*?)\); the epilogue", src)
        key = (re.sub(r"^k\d+_", "", k["name"]), (r.group(1) if r else "?")[:200])
        why[key] += 1; t[key] += k["stats"]["median_ns"] / 1e3
    for key, n in why.most_common():
        print(f"  split x{n} {t[key]:7.1f} us  {key[0][:36]}: {key[1]}")
def kinds(d):
    c = collections.defaultdict(lambda: [0, 0.0, ""])
    for k in load(d):
        n = re.sub(r"^k\d+_", "", k["name"]); c[n][0] += 1; c[n][1] += k["stats"]["median_ns"] / 1e3; c[n][2] = k["strategy"][:26]
    return c
o, n = kinds("/tmp/p_gpt2_f32_old"), kinds("/tmp/p_gpt2_f32_new")
print(f"gpt2 f32 kernel sum old {sum(v[1] for v in o.values()):.1f} new {sum(v[1] for v in n.values()):.1f} us")
for k in sorted(set(o) | set(n), key=lambda k: -abs(n.get(k, [0, 0, ""])[1] - o.get(k, [0, 0, ""])[1]))[:6]:
    a, b = o.get(k, [0, 0, ""]), n.get(k, [0, 0, ""])
    print(f"  {k[:36]:36s} old {a[1]:7.1f} x{a[0]:3d} {a[2]:26s} new {b[1]:7.1f} x{b[0]:3d} {b[2]}")
PY
echo "== (c) max-autotune ($SECONDS s)"
for m in vit_b_16 bert; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for mode in default max-autotune; do
    echo -n "$m bf16 $mode: "; SINTER_CACHE_DIR=/tmp/sc_new timeout 200 $B bench --backend cuda --model $f $ins --precision bf16 --mode $mode --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | cut -c1-150
  done
done
for r in 1 2; do for bin in old new; do ab_bench gpt2 bf16 $bin; done; done
echo "== done ($SECONDS s)"
