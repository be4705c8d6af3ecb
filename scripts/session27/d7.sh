#!/usr/bin/env bash
# Session 27, device call 7 (issue 10's device check): the ONNX node suite on the CPU reference and
# through CUDA (`sinter conformance`), and every case the reference passes that CUDA does not.
source scripts/device_env.sh
suite=$(mktemp -d)
python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1; echo "suite rc $? ($SECONDS s)"
timeout 150 $B conformance "$suite" --backend cpu --json "$OUT/conf-cpu.json" 2>&1 | tail -3
echo "== cuda ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_conf timeout 420 $B conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -3
python3 - "$OUT/conf-cpu.json" "$OUT/conf-cuda.json" <<'PY'
import json, sys
def load(p):
    try: return {c["name"]: c for c in json.load(open(p))["cases"]}
    except Exception as e: print("cannot read", p, e); return {}
cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
ok = lambda c: str(c.get("status")).lower() == "pass"
both = [n for n in cpu if ok(cpu[n])]
miss = [n for n in both if not (n in cuda and ok(cuda[n]))]
print(f"cpu passes {len(both)} of {len(cpu)}; cuda passes {sum(ok(c) for c in cuda.values())} of {len(cuda)}; cpu-pass cases not passing on cuda: {len(miss)}")
for n in miss[:20]:
    c = cuda.get(n, {})
    print(" ", n, c.get("status"), c.get("max_error"), str(c.get("error") or c.get("message") or "")[:150])
PY
echo "== done ($SECONDS s)"
