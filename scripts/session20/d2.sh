#!/usr/bin/env bash
# Session 20, device call 2 (issue 13): where a bf16 cold compile goes. Call 1's zoo measured
# sinter's first --precision bf16 compile at 2.5-10 s (ViT-B/16 10.1 s) against 0.9-2.1 s in f32.
# Three models exported again (no torch timing), then per model, each in a fresh process with an
# empty cache: bf16 cold, bf16 warm, f32 cold, all with SINTER_LOG=compile (full logs in $OUT).
# The models' structure without weights comes back for offline profiles (strip_weights.py).
source scripts/device_env.sh
MODELS=vit_b_16,gpt2,resnet50
echo "== (a) export ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --work /tmp/zoo --keep --exporters legacy --batch 8 --base \
  --no-torch-timing 2>&1 | grep -E "PASS|FAIL|done in" | cut -c1-200
echo "== (b) compiles ($SECONDS s)"
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx
  ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  python3 scripts/session12/strip_weights.py $f $OUT/$m.stripped.onnx > /dev/null 2>&1 || echo "strip $m failed"
  for run in bf16-cold bf16-warm f32-cold; do
    case $run in bf16-cold|f32-cold) rm -rf /tmp/c1;; esac
    p=bf16; [ $run = f32-cold ] && p=f32
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 90 $B run $f $ins --backend cuda --precision $p --out /tmp/o.npz > $OUT/$m-$run.log 2>&1
    echo "$m $run rc $?: $(grep -E "compile [0-9.]+ s|per run" $OUT/$m-$run.log | head -2 | tr '\n' ' ' | cut -c1-200)"
  done
done
echo "== done ($SECONDS s)"
