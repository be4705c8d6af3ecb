#!/usr/bin/env bash
# Real PyTorch models through the sinter binary on the device machine, in two parts.
#
# Needs python3 with torch, onnx, onnxruntime, numpy (no Rust); torchvision, transformers and
# onnxscript where present (each missing one skips what needs it, with a line saying so). From
# the repo root:
#   onnx/models/device_check.sh [BIN]          # BIN defaults to .bench/sinter
# Env: OUT (results, default /tmp/out), PARTS (default "committed zoo"), TOL (default 1e-4),
# RUN_ARGS (extra flags of every `sinter run` of the committed part; default `--tf32 off`: the
# 1e-4 comparison with onnxruntime is one of exact f32, and PyTorch's default lets convolutions
# run in TF32, ~1e-3 relative; RUN_ARGS="" TOL=5e-3 checks the default precision instead),
# FROM_REPO=1 (the committed part runs the committed model files instead of exporting afresh).
#
# Part "committed": the models of export_models.py against onnxruntime. MODELS (comma list,
# default the committed small models of both exporters, the dynamo_* ones only when onnxscript is
# installed, plus torchvision resnet18 and mobilenet_v3_small with random weights, batch 2,
# 224x224), BACKENDS (default "wgsl cpu").
#
# It exports the models with export_models.py into a temp folder (inputs + onnxruntime reference
# outputs in the ONNX backend-test layout), runs `BIN run model.onnx --input ... --backend B
# --out sinter_B.npz` for every data set and backend, and compares in Python
# (compare_outputs.py): one line per model / data set / backend with the relative error
# max|a-b| / max|ref| and PASS/FAIL; $OUT/models_check.json holds the same, $OUT/manifest.json the
# export manifest (torch-vs-ort differences, versions), $OUT/logs/ each run's stderr.
#
# Part "zoo" (zoo_check.py): torchvision resnet18, resnet50, mobilenet_v3_small, efficientnet_b0,
# vit_b_16 and transformers' BertModel, GPT2LMHeadModel, ViTModel (random weights, configs only),
# each exported both ways (dynamo=False opset 17, dynamo=True opset 18), run through
# `BIN run --backend $ZOO_BACKEND` and compared with torch's own output, with torch eager and
# torch.compile timed on the same inputs in the same call; one table (model, exporter, import ok,
# max err, sinter ms, eager ms, compile ms) on stdout, JSON in $OUT/zoo_check.json. ZOO_BACKEND
# (default cuda), ZOO_MODELS (default all), ZOO_BUDGET_S (default 420: no new model is started
# after that many seconds of the part; the rest are listed as skipped), ZOO_ARGS (more flags of
# zoo_check.py, e.g. "--tiny --iters 3" for a CPU smoke run with ZOO_BACKEND=cpu).
set -uo pipefail
BIN=${1:-}
[ -n "$BIN" ] && BIN=$(realpath "$BIN")
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/.bench/sinter}
[ -x "$BIN" ] || { echo "device_check: no sinter binary at $BIN" >&2; exit 1; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
PARTS=${PARTS:-committed zoo}
LEGACY_MODELS=mlp,cnn,transformer,vit_tiny,misc,rnn
DYNAMO_MODELS=dynamo_mlp,dynamo_cnn,dynamo_transformer,dynamo_vit_tiny,dynamo_misc,dynamo_rnn,dynamo_transformer_external
BACKENDS=${BACKENDS:-wgsl cpu}
TOL=${TOL:-1e-4}
RUN_ARGS=${RUN_ARGS---tf32 off}
has() { python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)" 2>/dev/null; }

# Vulkan loader and driver as scripts/device_bench.sh sets them up.
if compgen -G ".gl/*.deb" >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -f "$VK_DRIVER_FILES" ] || unset VK_DRIVER_FILES
export SINTER_CACHE_DIR=${SINTER_CACHE_DIR:-/tmp/sinter-cache} XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, onnxruntime; print('torch', torch.__version__, 'onnxruntime', onnxruntime.__version__)"

# Part "committed": export_models.py's models against onnxruntime.
committed_part() {
  if [ -z "${MODELS:-}" ]; then
    MODELS=$LEGACY_MODELS
    if has onnxscript; then MODELS=$MODELS,$DYNAMO_MODELS
    else echo "skipped: the dynamo_* models (onnxscript not installed; the dynamo exporter needs it)"; fi
    if has torchvision; then MODELS=$MODELS,resnet18,mobilenet_v3_small
    else echo "skipped: resnet18, mobilenet_v3_small (torchvision not installed)"; fi
  fi
  local work; work=$(mktemp -d /tmp/sinter-models.XXXXXX)
  echo "== export $MODELS into $work"
  local erc=0
  if [ "${FROM_REPO:-0}" = 1 ]; then
    # The committed files as they are (exported where the manifest says), not a fresh export.
    echo "(the committed models, not re-exported)"
    for m in $(echo "$MODELS" | tr , ' '); do [ -d "onnx/models/$m" ] && cp -r "onnx/models/$m" "$work/"; done
    cp onnx/models/manifest.json "$work/"
    : >"$OUT/logs/export.out"
  else
    python3 onnx/models/export_models.py --out "$work" --models "$MODELS" \
      >"$OUT/logs/export.out" 2>"$OUT/logs/export.err" || erc=$?
  fi
  # 3: some models failed to export (named in the output, each counted as a failure below); the
  # others are still run and compared.
  if [ "$erc" -ne 0 ] && [ "$erc" -ne 3 ]; then
    echo "export failed:"; tail -20 "$OUT/logs/export.err"; rm -rf "$work"; return 1
  fi
  grep -v '^\[torch.onnx\]' "$OUT/logs/export.out"
  cp "$work/manifest.json" "$OUT/manifest.json"

  echo "== run (backends: $BACKENDS)"
  local md sd m s b k t0 ms
  for md in "$work"/*/; do
    m=$(basename "$md")
    [ -f "$md/model.onnx" ] || continue
    for sd in "$md"test_data_set_*/; do
      s=$(basename "$sd")
      local ins=()
      for k in $(ls "$sd" | sed -n 's/^input_\([0-9]*\)\.pb$/\1/p' | sort -n); do ins+=(--input "$sd/input_$k.pb"); done
      for b in $BACKENDS; do
        t0=$(date +%s%N)
        # shellcheck disable=SC2086 # RUN_ARGS is a list of flags
        if "$BIN" run "$md/model.onnx" "${ins[@]}" --backend "$b" $RUN_ARGS --out "$sd/sinter_$b.npz" \
            >"$OUT/logs/$m-$s-$b.log" 2>&1; then :; else
          cp "$OUT/logs/$m-$s-$b.log" "$sd/sinter_$b.err"; rm -f "$sd/sinter_$b.npz"
        fi
        ms=$(( ($(date +%s%N) - t0) / 1000000 ))
        printf '%-28s %-16s %-6s %8d ms\n' "$m" "$s" "$b" "$ms"
      done
    done
  done

  echo "== compare with onnxruntime (tolerance $TOL)"
  python3 onnx/models/compare_outputs.py "$work" --backends "$(echo $BACKENDS | tr ' ' ,)" --tol "$TOL" \
    --json "$OUT/models_check.json" | tee "$OUT/models_check.txt"
  local rc=${PIPESTATUS[0]}
  rm -rf "$work"
  [ "$erc" -eq 0 ] || rc=1
  return "$rc"
}

# Part "zoo": public model families through both exporters, against torch, timed beside torch.
zoo_part() {
  local backend=${ZOO_BACKEND:-cuda}
  echo "== zoo: torchvision / transformers models, both exporters, sinter ($backend) vs torch; torch eager and torch.compile timed"
  mkdir -p "$OUT/logs/zoo"
  PYTHONUNBUFFERED=1 python3 onnx/models/zoo_check.py --bin "$BIN" --backend "$backend" \
    --models "${ZOO_MODELS:-resnet18,resnet50,mobilenet_v3_small,efficientnet_b0,vit_b_16,bert,gpt2,vit_hf}" \
    --tol "$TOL" --budget-s "${ZOO_BUDGET_S:-420}" --logs "$OUT/logs/zoo" --json "$OUT/zoo_check.json" \
    ${ZOO_ARGS:-} 2>"$OUT/logs/zoo.err"
  local rc=$?
  [ "$rc" -eq 0 ] || tail -5 "$OUT/logs/zoo.err"
  return "$rc"
}

rc_all=0
for part in $PARTS; do
  case $part in
    committed) committed_part || rc_all=1 ;;
    zoo) zoo_part || rc_all=1 ;;
    *) echo "device_check: unknown part $part (known: committed zoo)" >&2; rc_all=1 ;;
  esac
done
exit "$rc_all"
