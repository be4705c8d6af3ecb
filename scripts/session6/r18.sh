#!/usr/bin/env bash
# resnet18: implicit-conv correctness, per-kernel profile (TF32 default and exact), bench beside torch.compile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
step "device_implicit + suite + device"
for t in device_implicit suite device; do .cudatest/$t --test-threads=1 >"$OUT/$t.log" 2>&1; echo "$t rc=$?"; grep -E "^test result|FAILED|panicked" "$OUT/$t.log" | head -8; done
step "device_matmul (conv/implicit filter none)"
.cudatest/device_matmul --test-threads=1 >"$OUT/mm.log" 2>&1; echo "rc=$?"; grep -E "FAILED|panicked|test result" "$OUT/mm.log" | head -8
step "check"
$BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --check --iters 3 --warmup 1 2>&1 | tail -3
for extra in "" "--tf32 off"; do
step "profile resnet18 $extra"
$BIN profile --workload resnet18_b32_f32 --backend cuda $extra --out $OUT/p"${extra// /}" 2>&1 | tail -1
python3 - "$OUT/p${extra// /}/profile.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); ks = p["kernels"]
tot = sum(k["stats"]["median_ns"] for k in ks)
agg = {}
for k in ks:
    a = agg.setdefault(" ".join(k["ops"])[:50], [0, 0.0, k["dtype"]]); a[0] += 1; a[1] += k["stats"]["median_ns"]
print(f"total {tot/1e6:.3f} ms over {len(ks)} kernels")
for ops, (n, t, dt) in sorted(agg.items(), key=lambda x: -x[1][1])[:10]:
    print(f"{t/1e6:8.3f} ms {n:4d}x  {dt}  {ops}")
for k in sorted(ks, key=lambda k: -k["stats"]["median_ns"])[:12]:
    print(k["name"][:40], k.get("strategy"), k["grid"], f'{k["stats"]["median_ns"]/1e3:.1f} us', k.get("registers"), k.get("flops"))
PY
done
step "bench"
$BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --json "$OUT/def.json" 2>&1 | tail -2
$BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --tf32 off --json "$OUT/off.json" 2>&1 | tail -2
SINTER_IMPLICIT_GEMM=0 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --json "$OUT/noimpl.json" 2>&1 | tail -2
step "torch"
PYTHONUNBUFFERED=1 timeout 240 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32 --out "$OUT/torch.json" >"$OUT/torch.log" 2>&1; tail -2 "$OUT/torch.log"
python3 .bench/compare.py "$OUT/torch.json" "$OUT/def.json" | tee "$OUT/compare.txt"
