#!/usr/bin/env bash
# The CUDA backend on the device machine (H100/H200), in one call per part. No Rust there: build
# here, copy the release binary to .bench/sinter and the test executables to .cudatest/, carry both.
#
#   scripts/device_cuda.sh check    # CUDA test binaries (shared suite, device tests), the ONNX node
#                                   # suite on cuda vs the CPU reference, real models vs onnxruntime
#   scripts/device_cuda.sh bench    # sinter bench --backend cuda (default, reduce-overhead) beside
#                                   # torch_anchor.py in the same call, compare.py's table
#   scripts/device_cuda.sh matmul   # contractions only: the shared suite's matmul cases, then bench
#                                   # (default and max-autotune) beside torch for the matmul workloads
#   scripts/device_cuda.sh attention # fused attention: every template and tuning vs the interpreter
#                                   # (.cudatest/device_attention), then the timing of the rendered
#                                   # kernels at the benchmark shapes beside torch's SDPA
#   scripts/device_cuda.sh attention-bench # the shared suite's attention cases, the ONNX node
#                                   # suite's attention cases and the exported transformers on cuda,
#                                   # then sinter bench (cuda default / max-autotune, wgsl) on the
#                                   # attention workloads beside torch_anchor.py in the same call
#   scripts/device_cuda.sh attention-check # every attention template and tuning (every engine)
#                                   # vs the interpreter, poisoned outputs, under a timeout that
#                                   # names a hung kernel (TEST_TIMEOUT, default 540 s)
#   scripts/device_cuda.sh attention-engines # every attention engine and tile (mma.sync, wgmma,
#                                   # overlapped, ping-pong) timed at the benchmark shapes, rendered
#                                   # kernels launched directly (.cudatest/device_attention)
#   scripts/device_cuda.sh attention-autotune # sinter bench on the two bf16 attention workloads:
#                                   # default, then max-autotune with every candidate's time
#                                   # (SINTER_LOG=autotune, fresh cache), beside torch's SDPA
#   scripts/device_cuda.sh attention-unfused # the attention workloads fused and unfused
#                                   # (SINTER_FUSE_ATTENTION=0) on cuda and wgsl in one call
#   scripts/device_cuda.sh all
#
# The device tests that render every candidate tuning (device_attention, device_matmul) take
# SINTER_TEST_TUNINGS="substr,substr": only the tunings whose strategy contains one of them are
# compiled, checked and timed (e.g. SINTER_TEST_TUNINGS="wgmma 64x128 wg1 s2,wgmma-tma").
#
# Results land in $OUT (default /tmp/out): logs, JSON reports, compare.txt.
set -uo pipefail
part=${1:-all}
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/.bench/sinter}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sinter-cache XDG_RUNTIME_DIR=/tmp
export SINTER_CUDA_INCLUDE=${SINTER_CUDA_INCLUDE:-/usr/local/cuda/include}
if compgen -G ".gl/*.deb" >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
  [ -f "$VK_DRIVER_FILES" ] || unset VK_DRIVER_FILES
fi
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader

if [ "$part" = check ] || [ "$part" = all ]; then
  step "CUDA test binaries"
  for t in .cudatest/*; do
    [ -x "$t" ] || continue
    echo "-- $t"
    "$t" --test-threads=1 >"$OUT/test-$(basename "$t").log" 2>&1; rc=$?
    grep -E "^test result|FAILED|panicked" "$OUT/test-$(basename "$t").log" | head -20
    [ $rc -eq 0 ] || echo "   $t exited $rc"
  done
  step "ONNX node suite: cpu reference and cuda"
  suite=$(mktemp -d)
  python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1
  "$BIN" conformance "$suite" --backend cpu --json "$OUT/conf-cpu.json" 2>&1 | tail -4
  "$BIN" conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -4
  python3 - "$OUT/conf-cpu.json" "$OUT/conf-cuda.json" <<'EOF' | tee "$OUT/conf-diff.txt"
import json, sys
def load(p):
    r = json.load(open(p))
    cases = r.get("cases", r.get("results", []))
    return {c["name"]: c for c in cases}
cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
ok = lambda c: c.get("status") == "pass"
both = [n for n in cpu if ok(cpu[n])]
miss = [n for n in both if not (n in cuda and ok(cuda[n]))]
print(f"cpu passes {len(both)}; cuda passes {sum(ok(c) for c in cuda.values())}; cpu-pass cases failing on cuda: {len(miss)}")
for n in miss[:60]:
    c = cuda.get(n, {})
    print(f"  {n}: {c.get('status')} {str(c.get('detail', c.get('message', '')))[:160]}")
EOF
  step "real models vs onnxruntime"
  PARTS=committed BACKENDS="cuda cpu" OUT="$OUT" onnx/models/device_check.sh "$BIN" 2>&1 | tail -30
fi

if [ "$part" = bench ] || [ "$part" = all ]; then
  step "sinter bench --backend cuda"
  "$BIN" calibrate --backend cuda --no-matmul 2>&1 | tail -3
  "$BIN" bench --backend cuda --no-calibrate --json "$OUT/sinter-cuda.json" 2>&1 | tee "$OUT/sinter-cuda.txt"
  "$BIN" bench --backend cuda --mode reduce-overhead --no-calibrate --iters 10 --warmup 5 \
    --workload add_relu_mul_10M_f32,cos_16M_f32,matmul_softmax_100_f32,pointwise_chain64_1024_f32,softmax_8192x8192_f32 \
    --json "$OUT/sinter-cuda-ro.json" 2>&1 | tee "$OUT/sinter-cuda-ro.txt"
  step "torch anchor"
  PYTHONUNBUFFERED=1 timeout 300 python3 .bench/torch_anchor.py --modes eager,default --out "$OUT/torch.json" >"$OUT/torch.log" 2>&1
  PYTHONUNBUFFERED=1 timeout 120 python3 .bench/torch_anchor.py --modes reduce-overhead \
    --only matmul_softmax_100_f32,pointwise_chain64_1024_f32 --out "$OUT/torch-ro.json" >>"$OUT/torch.log" 2>&1
  tail -3 "$OUT/torch.log"
  python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter-cuda.json" "$OUT/sinter-cuda-ro.json" | tee "$OUT/compare.txt"
  python3 - "$OUT/torch-ro.json" <<'EOF2'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print("torch", r["name"], r["mode"], f"{r['ms'] * 1e3:.1f} us")
EOF2
fi
if [ "$part" = matmul ]; then
  MM=${MM:-matmul_8192_bf16,mlp_8192x4096x16384_bf16,matmul_softmax_4096_bf16,matmul_4096_f32}
  step "shared suite: contractions"
  .cudatest/suite --test-threads=1 matmul dtype_ conv >"$OUT/test-suite-mm.log" 2>&1; rc=$?
  grep -E "^test result|FAILED|panicked" "$OUT/test-suite-mm.log" | head -20; [ $rc -eq 0 ] || echo "   suite exited $rc"
  step "shared suite: contractions through cuBLASLt (SINTER_CUDA_LIBRARY=force)"
  SINTER_CUDA_LIBRARY=force .cudatest/suite --test-threads=1 matmul dtype_ conv >"$OUT/test-suite-lib.log" 2>&1; rc=$?
  grep -E "^test result|FAILED|panicked" "$OUT/test-suite-lib.log" | head -20; [ $rc -eq 0 ] || echo "   suite exited $rc"
  .cudatest/device --test-threads=1 tensor_core >"$OUT/test-device-tc.log" 2>&1; rc=$?
  grep -E "^test result|FAILED|panicked" -A3 "$OUT/test-device-tc.log" | head -12
  step "sinter bench (default, max-autotune)"
  "$BIN" calibrate --backend cuda 2>&1 | tail -4
  "$BIN" bench --backend cuda --no-calibrate --workload "$MM" --scale reduced --check --iters 3 --warmup 1 2>&1 | tail -6
  "$BIN" bench --backend cuda --no-calibrate --workload "$MM" --json "$OUT/sinter-mm.json" 2>&1 | tee "$OUT/sinter-mm.txt" | tail -12
  SINTER_LOG=autotune "$BIN" bench --backend cuda --mode max-autotune --no-calibrate --workload "$MM" \
    --json "$OUT/sinter-mm-at.json" >"$OUT/sinter-mm-at.txt" 2>&1; tail -12 "$OUT/sinter-mm-at.txt"
  step "torch anchor"
  PYTHONUNBUFFERED=1 timeout 240 python3 .bench/torch_anchor.py --modes eager,default --only "$MM" \
    --out "$OUT/torch-mm.json" >"$OUT/torch-mm.log" 2>&1; tail -2 "$OUT/torch-mm.log"
  python3 .bench/compare.py "$OUT/torch-mm.json" "$OUT/sinter-mm.json" "$OUT/sinter-mm-at.json" | tee "$OUT/compare-mm.txt"
fi
if [ "$part" = attention ]; then
  t=$(ls .cudatest/device_attention* 2>/dev/null | head -1)
  step "attention: timing of the rendered kernels"
  "$t" --ignored --nocapture --test-threads=1 attention_timing >"$OUT/attention-timing.log" 2>&1 || echo "   timing exited $?"
  grep TFLOP "$OUT/attention-timing.log" | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}'
  grep -E "panicked" -A3 "$OUT/attention-timing.log" | head -8
  step "attention: every template and tuning vs the interpreter"
  "$t" --test-threads=1 --nocapture attention_matches >"$OUT/test-attention.log" 2>&1; rc=$?
  grep -cE " ok$" "$OUT/test-attention.log"; grep -E "FAILED|panicked|^test result" "$OUT/test-attention.log" | head -30
  [ $rc -eq 0 ] || echo "   $t exited $rc"
  if [ -n "${NCU:-}" ] && command -v ncu >/dev/null; then
    step "ncu: the first launch of the default d64 kernel"
    timeout 240 ncu --kernel-name k0_attention --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
      "$t" --ignored --test-threads=1 attention_timing >"$OUT/ncu.txt" 2>&1 || echo "   ncu exited $?"
    grep -E "Throughput|Pipe|Issue|Occupancy|Registers|Stall|Warp Cycles|Executed Ipc|Block Limit" "$OUT/ncu.txt" | head -40
  fi
  step "torch SDPA at the same shapes"
  PYTHONUNBUFFERED=1 timeout 120 python3 scripts/torch_sdpa.py 2>&1 | tail -5
fi

if [ "$part" = attention-bench ]; then
  AW=${AW:-attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16}
  step "shared suite: attention cases on cuda"
  .cudatest/suite --test-threads=1 attention >"$OUT/test-suite-attn.log" 2>&1; rc=$?
  grep -E "^test result|FAILED|panicked" "$OUT/test-suite-attn.log" | head -20; [ $rc -eq 0 ] || echo "   suite exited $rc"
  step "ONNX node suite: attention cases, cpu and cuda"
  suite=$(mktemp -d); python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1
  asuite=$(mktemp -d); mkdir -p "$asuite/node"; for d in "$suite"/node/test_attention*; do ln -s "$d" "$asuite/node/"; done
  "$BIN" conformance "$asuite" --backend cpu 2>&1 | tail -1
  "$BIN" conformance "$asuite" --backend cuda --json "$OUT/conf-attn-cuda.json" 2>&1 | tail -1
  python3 - "$OUT/conf-attn-cuda.json" <<'EOF3'
import json, sys
r = json.load(open(sys.argv[1])); cases = r.get("cases", r.get("results", []))
for c in cases:
    if c.get("status") != "pass":
        print("  ", c["name"], c.get("status"), str(c.get("detail", c.get("message", "")))[:150])
EOF3
  step "exported transformers vs onnxruntime (cuda, wgsl)"
  PARTS=committed MODELS=transformer,vit_tiny BACKENDS="cuda wgsl" OUT="$OUT" onnx/models/device_check.sh "$BIN" 2>&1 | tail -8
  step "sinter bench --check (reduced) and timing (cuda default, max-autotune; wgsl)"
  "$BIN" bench --backend cuda --workload "$AW" --scale reduced --check --iters 3 --warmup 1 2>&1 | tail -5
  "$BIN" calibrate --backend cuda --no-matmul 2>&1 | tail -2
  "$BIN" bench --backend cuda --no-calibrate --workload "$AW" --json "$OUT/sinter-attn.json" 2>&1 | tail -6
  SINTER_LOG=autotune "$BIN" bench --backend cuda --mode max-autotune --no-calibrate --workload "$AW" \
    --json "$OUT/sinter-attn-at.json" >"$OUT/sinter-attn-at.txt" 2>&1; tail -6 "$OUT/sinter-attn-at.txt"
  grep -iE "chose|winner|best" "$OUT/sinter-attn-at.txt" | head -6
  timeout 240 "$BIN" bench --backend wgsl --no-calibrate --workload "$AW" --json "$OUT/sinter-attn-wgsl.json" \
    >"$OUT/sinter-attn-wgsl.txt" 2>&1; tail -6 "$OUT/sinter-attn-wgsl.txt"
  step "torch anchor"
  TW="$AW,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16"
  PYTHONUNBUFFERED=1 timeout 300 python3 .bench/torch_anchor.py --modes eager,default --only "$TW" \
    --out "$OUT/torch-attn.json" >"$OUT/torch-attn.log" 2>&1; tail -2 "$OUT/torch-attn.log"
  python3 .bench/compare.py "$OUT/torch-attn.json" "$OUT/sinter-attn.json" "$OUT/sinter-attn-at.json" \
    "$OUT/sinter-attn-wgsl.json" | tee "$OUT/compare-attn.txt"
  python3 - "$OUT/torch-attn.json" <<'EOF4'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["name"].startswith("sdpa"):
        print("torch", r["name"], r["mode"], f"{r['ms']:.4f} ms")
EOF4
fi

if [ "$part" = attention-engines ]; then
  t=$(ls .cudatest/device_attention* 2>/dev/null | head -1)
  step "attention: every engine and tile at the benchmark shapes (median of 5 x 20 launches)"
  timeout "${TEST_TIMEOUT:-540}" "$t" --ignored --nocapture --test-threads=1 attention_timing >"$OUT/attention-timing.log" 2>&1 \
    || echo "   timing exited $? (124: timed out, a kernel hung: the next tuning after the last line)"
  grep TFLOP "$OUT/attention-timing.log" | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^decode"
  grep -E "panicked" -A3 "$OUT/attention-timing.log" | head -8
fi
if [ "$part" = attention-autotune ]; then
  AW=${AW:-attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16}
  step "sinter bench: default, then max-autotune with every candidate's time (fresh cache)"
  "$BIN" bench --backend cuda --no-calibrate --no-cache --workload "$AW" --json "$OUT/attn-default.json" 2>&1 | tail -4
  SINTER_CACHE_DIR=$(mktemp -d) SINTER_LOG=autotune timeout 420 "$BIN" bench --backend cuda --mode max-autotune \
    --no-calibrate --workload "$AW" --json "$OUT/attn-autotune.json" >"$OUT/attn-autotune.txt" 2>&1 || echo "   exited $?"
  python3 - "$OUT/attn-autotune.txt" <<'EOF6'
import re, sys
rows = []
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"(\S+): Tuning \{.*?(attn: Some\((AttnTile \{[^}]*\})\)|block: Some\((\d+)\)).*?: (\d+) ns$", line.strip())
    if m and (m.group(3) or "attention" in m.group(1)):
        rows.append((m.group(1), int(m.group(5)), m.group(3) or f"rows/decode block {m.group(4)}"))
    elif "chose" in line and "attention" in line:
        print("  ", line.strip().split("sinter::autotune: ")[-1][:200])
for k, ns, t in sorted(rows):
    print(f"   {k:16} {ns / 1e6:8.4f} ms  {t}")
EOF6
  tail -4 "$OUT/attn-autotune.txt"
  step "torch SDPA (flash) at the same shapes"
  PYTHONUNBUFFERED=1 timeout 120 python3 scripts/torch_sdpa.py 2>&1 | tail -4
fi
if [ "$part" = attention-check ]; then
  t=$(ls .cudatest/device_attention* 2>/dev/null | head -1)
  step "attention: every template and tuning vs the interpreter (poisoned outputs)"
  timeout "${TEST_TIMEOUT:-540}" "$t" --test-threads=1 --nocapture attention_matches >"$OUT/test-attention.log" 2>&1; rc=$?
  grep -cE " ok$" "$OUT/test-attention.log"; grep -E "FAILED|panicked|per engine|^test result" "$OUT/test-attention.log" | head -30
  [ $rc -eq 0 ] || echo "   $t exited $rc (124: timed out, a kernel hung: the last line names its case and tuning)"
  [ $rc -eq 124 ] && tail -c 300 "$OUT/test-attention.log"
fi

if [ "$part" = attention-unfused ]; then
  AW=${AW:-attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16}
  for b in cuda wgsl; do
    step "$b: fused, then unfused (SINTER_FUSE_ATTENTION=0)"
    timeout 200 "$BIN" bench --backend $b --no-calibrate --no-cache --workload "$AW" --json "$OUT/attn-$b-fused.json" 2>&1 | tail -4
    SINTER_FUSE_ATTENTION=0 timeout 200 "$BIN" bench --backend $b --no-calibrate --no-cache --workload "$AW" \
      --json "$OUT/attn-$b-unfused.json" 2>&1 | tail -4
  done
fi
step done
