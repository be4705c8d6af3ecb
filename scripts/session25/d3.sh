#!/usr/bin/env bash
# Session 25, device call 3 (issue 13): residual streams stored for cuBLASLt's C
# (`CostModel::materialize_residual`, CUDA: on), the f32-bias-on-bf16 rule withdrawn. (a) the
# library device tests, the suite; (b) GPT-2, ViT-B/16, BERT-base: old (e72d2b9) and new
# alternating in `bench` (bf16 and f32), the split products left and their reasons.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 150 .cudatest/device library_ --test-threads 1 --nocapture > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "gelu|autocast|test result|^test " /tmp/dev.log | cut -c1-300 | head -20
grep -A3 "panicked" /tmp/dev.log | cut -c1-1500 | head -12
timeout 240 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
SINTER_CUDA_LIBRARY=force timeout 100 .cudatest/suite matmul --test-threads 2 > /tmp/suitef.log 2>&1; echo "suite (forced library) rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suitef.log | head -4
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16,bert --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|vit_b_16|bert) " | grep -v "done in" | cut -c1-160
for m in gpt2 bert vit_b_16; do for r in 1 2; do for bin in old new; do ab_bench $m bf16 $bin; done; done; done
for m in gpt2 bert; do for r in 1 2; do for bin in old new; do ab_bench $m f32 $bin; done; done; done
for m in gpt2 vit_b_16 bert; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  SINTER_CACHE_DIR=/tmp/sc_new timeout 90 $B profile --backend cuda --model $f $ins --precision bf16 --out /tmp/p_$m > /dev/null 2>&1; echo "$m profile rc $?"
done
python3 - <<'PY'
import json, re, collections, os
for m in ["gpt2", "vit_b_16", "bert"]:
    d = f"/tmp/p_{m}"; ks = json.load(open(f"{d}/profile.json"))["kernels"]
    print(f"{m} bf16: {len(ks)} kernels, sum {sum(k['stats']['median_ns'] for k in ks)/1e3:.1f} us")
    why = collections.Counter(); t = collections.Counter()
    for k in ks:
        if "cublaslt" not in k["strategy"]: continue
        sp = os.path.join(d, k.get("source_path") or "-"); src = open(sp).read() if os.path.exists(sp) else ""
        r = re.search(r"not a library epilogue: (.*?)\); the epilogue", src)
        e = re.search(r"epilogue (acc[^,]*), heuristic", src)
        key = (re.sub(r"^k\d+_", "", k["name"]), k["strategy"].split()[1], (r.group(1) if r else (e.group(1) if e else ""))[:120])
        why[key] += 1; t[key] += k["stats"]["median_ns"] / 1e3
    for key, n in sorted(why.items(), key=lambda kv: -t[kv[0]]):
        print(f"  {key[1]:6s} x{n:2d} {t[key]:7.1f} us  {key[0][:34]}: {key[2]}")
PY
echo "== done ($SECONDS s)"
