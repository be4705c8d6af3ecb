#!/usr/bin/env bash
# Real PyTorch models through the sinter binary on the device machine, against onnxruntime.
#
# Needs python3 with torch, torchvision, onnx, onnxruntime, numpy (no Rust). From the repo root:
#   onnx/models/device_check.sh [BIN]          # BIN defaults to .bench/sinter
# Env: OUT (results, default /tmp/out), MODELS (comma list, default the committed small models
# plus torchvision resnet18 and mobilenet_v3_small with random weights, batch 2, 224x224),
# BACKENDS (default "wgsl cpu"), TOL (default 1e-4).
#
# It exports the models with export_models.py into a temp folder (inputs + onnxruntime reference
# outputs in the ONNX backend-test layout), runs `BIN run model.onnx --input ... --backend B
# --out sinter_B.npz` for every data set and backend, and compares in Python
# (compare_outputs.py): one line per model / data set / backend with the relative error
# max|a-b| / max|ref| and PASS/FAIL; $OUT/models_check.json holds the same, $OUT/manifest.json the
# export manifest (torch-vs-ort differences, versions), $OUT/logs/ each run's stderr.
set -uo pipefail
BIN=${1:-}
[ -n "$BIN" ] && BIN=$(realpath "$BIN")
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/.bench/sinter}
[ -x "$BIN" ] || { echo "device_check: no sinter binary at $BIN" >&2; exit 1; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
MODELS=${MODELS:-mlp,cnn,transformer,vit_tiny,misc,rnn,resnet18,mobilenet_v3_small}
BACKENDS=${BACKENDS:-wgsl cpu}
TOL=${TOL:-1e-4}

# Vulkan loader and driver as scripts/device_bench.sh sets them up.
if compgen -G ".gl/*.deb" >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -f "$VK_DRIVER_FILES" ] || unset VK_DRIVER_FILES
export SINTER_CACHE_DIR=${SINTER_CACHE_DIR:-/tmp/sinter-cache} XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, onnxruntime; print('torch', torch.__version__, 'onnxruntime', onnxruntime.__version__)"

WORK=$(mktemp -d /tmp/sinter-models.XXXXXX)
echo "== export $MODELS into $WORK"
python3 onnx/models/export_models.py --out "$WORK" --models "$MODELS" 2>"$OUT/logs/export.err" \
  || { tail -20 "$OUT/logs/export.err"; exit 1; }
cp "$WORK/manifest.json" "$OUT/manifest.json"

echo "== run (backends: $BACKENDS)"
for md in "$WORK"/*/; do
  m=$(basename "$md")
  [ -f "$md/model.onnx" ] || continue
  for sd in "$md"test_data_set_*/; do
    s=$(basename "$sd")
    ins=()
    for k in $(ls "$sd" | sed -n 's/^input_\([0-9]*\)\.pb$/\1/p' | sort -n); do ins+=(--input "$sd/input_$k.pb"); done
    for b in $BACKENDS; do
      t0=$(date +%s%N)
      if "$BIN" run "$md/model.onnx" "${ins[@]}" --backend "$b" --out "$sd/sinter_$b.npz" \
          >"$OUT/logs/$m-$s-$b.log" 2>&1; then :; else
        cp "$OUT/logs/$m-$s-$b.log" "$sd/sinter_$b.err"; rm -f "$sd/sinter_$b.npz"
      fi
      ms=$(( ($(date +%s%N) - t0) / 1000000 ))
      printf '%-20s %-16s %-6s %8d ms\n' "$m" "$s" "$b" "$ms"
    done
  done
done

echo "== compare with onnxruntime (tolerance $TOL)"
python3 onnx/models/compare_outputs.py "$WORK" --backends "$(echo $BACKENDS | tr ' ' ,)" --tol "$TOL" \
  --json "$OUT/models_check.json" | tee "$OUT/models_check.txt"
rc=${PIPESTATUS[0]}
rm -rf "$WORK"
exit "$rc"
