#!/usr/bin/env bash
# Session 8, device call 2: small kernels of heavy arithmetic keep one lane per thread, one
# 16-byte group per thread by default again. The CUDA shared suite, pointwise_chain64 beside
# torch in one call (default and reduce-overhead), then the ONNX node suite on the CPU reference
# and on CUDA (the sin/cos helper against every case the reference passes).
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 .cudatest/suite --test-threads 1 > "$OUT/suite.log" 2>&1; echo "suite rc=$? $(grep -E '^test result' "$OUT/suite.log" | tail -1)"
grep -E "FAILED|panicked" -A3 "$OUT/suite.log" | head -8
W=pointwise_chain64_1024_f32,add_relu_mul_10M_f32,cos_16M_f32
PYTHONUNBUFFERED=1 timeout 120 python3 .bench/torch_anchor.py --modes eager,default,reduce-overhead --only $W --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; echo "torch rc=$?"
$BIN bench --backend cuda --workload $W --json "$OUT/sinter.json" 2>&1 | grep -vE '^#' | cut -c1-200
$BIN bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32 --json "$OUT/sinter-ro.json" 2>&1 | grep -vE '^#' | cut -c1-200
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json" "$OUT/sinter-ro.json" | tee "$OUT/compare.txt"
suite=$(mktemp -d); python3 onnx/conformance/make_onnx_suite.py "$suite" > /dev/null 2>&1; echo "cases: $(ls "$suite" | wc -l)"
timeout 150 $BIN conformance "$suite" --backend cpu --json "$OUT/conf-cpu.json" 2>&1 | tail -2
timeout 150 $BIN conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -2
python3 - "$OUT/conf-cpu.json" "$OUT/conf-cuda.json" <<'PY'
import json, sys
def load(p):
    r = json.load(open(p)); cases = r.get("cases", r.get("results", []))
    return {c["name"]: c for c in cases}
cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
ok = lambda c: c.get("status") == "pass"
both = [n for n in cpu if ok(cpu[n])]
miss = [n for n in both if not (n in cuda and ok(cuda[n]))]
print(f"cpu passes {len(both)}; cuda passes {sum(ok(c) for c in cuda.values())}; cpu-pass cases failing on cuda: {len(miss)}")
for n in miss[:20]: print("  ", n, str(cuda.get(n, {}).get("detail", ""))[:150])
trig = [n for n in both if any(t in n for t in ("_sin", "_cos"))]
print(f"sin/cos cases the reference passes: {len(trig)}, on cuda: {sum(ok(cuda.get(n, {})) for n in trig)}")
PY
