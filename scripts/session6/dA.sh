#!/usr/bin/env bash
# Call A: correctness of split-k, TMA, ping-pong (under timeouts), then the timings of the new engines.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
step "device_matmul: implicit conv (split-k), TMA maps, every matmul tuning"
timeout 100 .cudatest/device_matmul --test-threads=1 --nocapture implicit_conv >"$OUT/conv.log" 2>&1; echo "rc=$?"; grep -c " ok$" "$OUT/conv.log"; grep -c "split-k.* ok$" "$OUT/conv.log"; grep -E "FAILED|panicked|test result" "$OUT/conv.log" | head -6
timeout 60 .cudatest/device_matmul --test-threads=1 --nocapture tma_tensor_maps >"$OUT/tmamaps.log" 2>&1; echo "rc=$?"; grep -E "FAILED|panicked|test result" -A3 "$OUT/tmamaps.log" | head -8
timeout 200 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches >"$OUT/mm.log" 2>&1; echo "rc=$?"; grep -c " ok$" "$OUT/mm.log"; grep -c "tma.* ok$" "$OUT/mm.log"; grep -E "FAILED|panicked|test result" "$OUT/mm.log" | head -8; tail -c 300 "$OUT/mm.log"
step "device_attention (ping-pong)"
timeout 150 .cudatest/device_attention --test-threads=1 --nocapture attention_matches >"$OUT/attn.log" 2>&1; rc=$?; echo "rc=$rc"; grep -cE " ok$" "$OUT/attn.log"; grep -E "FAILED|panicked|per engine|^test result" "$OUT/attn.log" | head -12; [ $rc -eq 0 ] || tail -c 300 "$OUT/attn.log"
step "device_implicit + device"
for t in device_implicit device; do timeout 80 .cudatest/$t --test-threads=1 >"$OUT/$t.log" 2>&1; echo "$t rc=$?"; grep -E "^test result|FAILED|panicked" "$OUT/$t.log" | head -6; done
step "TMA tile timings at 8192"
timeout 90 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings 2>&1 | grep -vE "^running|^$" | tail -14
step "attention engines timed"
timeout 100 .cudatest/device_attention --ignored --nocapture --test-threads=1 attention_timing >"$OUT/attention-timing.log" 2>&1 || echo "timing exited $?"
grep TFLOP "$OUT/attention-timing.log" | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^decode" | sort -t' ' -k1,1 | head -40
step "resnet18 check + profile"
timeout 60 $BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --check --iters 3 --warmup 1 2>&1 | tail -2
timeout 60 $BIN profile --workload resnet18_b32_f32 --backend cuda --out $OUT/p 2>&1 | tail -1
python3 - "$OUT/p/profile.json" <<'PY'
import json, sys
ks = json.load(open(sys.argv[1]))["kernels"]
print(f"total {sum(k['stats']['median_ns'] for k in ks)/1e6:.3f} ms over {len(ks)} kernels")
for k in sorted(ks, key=lambda k: -k["stats"]["median_ns"])[:14]:
    print(k["name"][:34], (k.get("strategy") or "")[:40], k["grid"][0], f'{k["stats"]["median_ns"]/1e3:.1f} us', k.get("registers"))
PY
step "bench resnet18 beside torch"
$BIN bench --backend cuda --no-calibrate --workload resnet18_b32_f32 --json "$OUT/def.json" 2>&1 | tail -1
PYTHONUNBUFFERED=1 timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32 --out "$OUT/torch.json" >"$OUT/torch.log" 2>&1; tail -1 "$OUT/torch.log"
python3 .bench/compare.py "$OUT/torch.json" "$OUT/def.json"
