#!/usr/bin/env bash
# Benchmarks on the device machine (H100/H200), in one call: Vulkan loader from the carried .gl
# debs, sinter's workloads through WGSL (eager and compiled), PyTorch anchors in the same call,
# and compare.py's side-by-side table. Usage (from the repo root on the device):
#   scripts/device_bench.sh BIN [extra sinter bench args]
# Results land in $OUT (sinter-*.json, torch.json, compare.txt).
set -uo pipefail
BIN=${1:?usage: device_bench.sh BIN}; shift
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -f "$VK_DRIVER_FILES" ] || unset VK_DRIVER_FILES
export SINTER_CACHE_DIR=/tmp/sinter-cache XDG_RUNTIME_DIR=/tmp
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$BIN" calibrate --backend wgsl 2>&1 | tee "$OUT/calibrate.txt"
"$BIN" bench --backend wgsl --eager --json "$OUT/sinter-wgsl.json" "$@" 2>&1 | tee "$OUT/sinter-wgsl.txt"
"$BIN" bench --backend wgsl --eager --workload resnet18_b32_f32 --iters 3 --warmup 2 --no-calibrate --json "$OUT/sinter-wgsl-resnet.json" 2>&1 | tail -3
"$BIN" profile --workload layernorm_gelu_8192x4096_f32 --backend wgsl --out /tmp/run1 2>&1 | tail -3 && tar -C /tmp -cf "$OUT/run1.tar" run1
"$BIN" bench --backend wgsl --mode reduce-overhead --no-calibrate --json "$OUT/sinter-wgsl-ro.json" "$@" 2>&1 | tee "$OUT/sinter-wgsl-ro.txt"
if [ -f .bench/torch_anchor.py ]; then
  PYTHONUNBUFFERED=1 python3 .bench/torch_anchor.py --modes eager,default --out "$OUT/torch.json" 2>&1 | tail -40
  python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter-wgsl.json" "$OUT/sinter-wgsl-ro.json" | tee "$OUT/compare.txt"
fi
