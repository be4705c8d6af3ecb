#!/usr/bin/env bash
# Session 7, device call 4: every CUDA device test binary after the session's merges (test-helper
# deduplication, prelude changes, the new attention defaults), and a per-kernel look at
# torchvision's ViT-B/16 (f32, batch 2), the one zoo model still behind torch.compile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for t in device device_dynamic device_fp8 device_implicit suite; do
  timeout 150 .cudatest/$t --test-threads 1 > "$OUT/$t.log" 2>&1; echo "$t rc=$? $(grep -E '^test result' "$OUT/$t.log" | tail -1)"
  grep -E "FAILED|panicked" "$OUT/$t.log" | head -5
done
timeout 150 .cudatest/device_matmul --test-threads 1 implicit_conv > "$OUT/device_matmul.log" 2>&1; echo "device_matmul implicit rc=$? $(grep -E '^test result' "$OUT/device_matmul.log")"
timeout 120 python3 - <<'PY' 2>&1 | tail -1
import torch, torchvision
m = torchvision.models.vit_b_16(weights=None).eval()
torch.onnx.export(m, torch.randn(2, 3, 224, 224), "/tmp/vit.onnx", dynamo=False, opset_version=17,
                  input_names=["image"], output_names=["logits"])
print("exported /tmp/vit.onnx")
PY
timeout 150 $BIN profile --model /tmp/vit.onnx --backend cuda --out /tmp/prof_vit > "$OUT/prof_vit.log" 2>&1; echo "profile rc=$?"
grep -E "Dominant" "$OUT/prof_vit.log"
python3 - <<'PY'
import json, collections
d = json.load(open("/tmp/prof_vit/profile.json"))
ks = d["kernels"]
tot = sum(k["stats"]["median_ns"] for k in ks)
print(f"{len(ks)} kernels, {tot/1e3:.1f} us of median kernel time per run")
groups = collections.defaultdict(lambda: [0, 0.0, 0.0, ""])
for k in ks:
    key = "_".join(k["name"].split("_")[1:])
    g = groups[key]; g[0] += 1; g[1] += k["stats"]["median_ns"]; g[2] += k["flops"]
    if not g[3]:
        try:
            src = open("/tmp/prof_vit/" + k["source_path"]).read().splitlines()
            g[3] = next((l for l in src if "//" in l and ("tile" in l or "library" in l or "cuBLAS" in l or "threads" in l)), "")[:150]
        except Exception:
            pass
for key, (n, ns, fl, src) in sorted(groups.items(), key=lambda x: -x[1][1])[:14]:
    print(f"{key[:40]:40} x{n:3} {ns/1e3:9.1f} us {fl/max(ns,1)/1e3:7.1f} TFLOP/s  {src}")
PY
