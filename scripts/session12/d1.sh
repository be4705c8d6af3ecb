#!/usr/bin/env bash
# Session 12, device call 1: where a cold compile goes (issues 10, 13). The seven real models of
# issue 13 exported (legacy exporter, batch 8, BERT-base / GPT-2 small at 8 x 128 tokens) and timed
# beside torch (cold compile and per-run, same call); then per model, with an empty cache each
# time and the operating system's caches warm, the session-11 binary and this build, each with
# SINTER_LOG=compile (phases; this build also the CUDA load's breakdown). Structures without
# weights come back for offline profiles.
set -uo pipefail
NEW=$PWD/.bench/sinter OLD=$PWD/.bench/sinter_s11
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
MODELS=resnet18,resnet50,convnext_tiny,efficientnet_b0,vit_b_16,bert,gpt2
SINTER_CACHE_DIR=/tmp/sc_zoo PYTHONUNBUFFERED=1 timeout 420 python3 onnx/models/zoo_check.py --bin "$NEW" --models $MODELS \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --base --iters 10 2>&1 | tail -12
mkdir -p $OUT
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx
  [ -f $f ] || { echo "$m: no export"; continue; }
  ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for b in OLD NEW; do
    rm -rf /tmp/c1
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 120 ${!b} run $f $ins --backend cuda --out /tmp/o.npz 2>&1 \
      | grep -E "compiled in|cuda load|: compile" | sed "s/^/$m $b: /" | cut -c1-400
  done
  python3 scripts/session12/strip_weights.py $f $OUT/$m.onnx > /dev/null 2>&1 || echo "$m: strip failed"
done
ls -la $OUT
