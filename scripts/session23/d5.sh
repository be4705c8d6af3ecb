#!/usr/bin/env bash
# Session 23, device call 5 (issue 13): call 4 measured GPT-2 small in bf16 3% slower at HEAD than
# at 1e08c67, with one kernel more a layer (135 -> 147). The compiler's decisions of both builds
# (`sinter profile`'s artifacts; `sinter run` writes none), brought back: each kernel's name and the decisions that differ.
source scripts/device_env.sh
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 150 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2 --base --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing --iters 3 2>&1 | grep -E "PASS|FAIL" | cut -c1-160
f=/tmp/zoo/gpt2/legacy/model.onnx
ins=$(for i in /tmp/zoo/gpt2/input_*.npy; do echo -n "--input $i "; done)
for bin in old new; do
  b=$B; [ $bin = old ] && b=$OLD
  SINTER_CACHE_DIR=/tmp/sc5_$bin timeout 90 $b profile --backend cuda --model $f $ins --precision bf16 --out /tmp/dbg_$bin > /dev/null 2>&1; echo "$bin rc $?"
  python3 - "$bin" <<'PY'
import json, sys, os
b = sys.argv[1]
d = f"/tmp/dbg_{b}"
f = json.load(open(f"{d}/fusion.json"))
out = os.environ["OUT"]
with open(f"{out}/fusion_{b}.txt", "w") as o:
    for x in f:
        o.write(f"{x['reason']} | {x['nodes'][:6]} | {x['kernels'][:3]}\n")
p = json.load(open(f"{d}/program.json"))
ks = p.get("kernels", p) if isinstance(p, dict) else p
with open(f"{out}/kernels_{b}.txt", "w") as o:
    for k in ks:
        o.write((k.get("name", "?") if isinstance(k, dict) else str(k)[:80]) + "\n")
print(b, len(f), "decisions", len(ks), "kernels")
PY
  cp /tmp/dbg_$bin/ir_post_fusion.txt $OUT/post_$bin.txt; cp /tmp/dbg_$bin/ir_pre_fusion.txt $OUT/pre_$bin.txt
done
echo "== done ($SECONDS s)"
