#!/usr/bin/env bash
# Session 25, device call 5 (issue 13): where a bf16 cold compile goes now (zoo call 4: GPT-2
# 1.39 s, ViT-B/16 1.65 s against torch.compile's 9.6 and 12.3 under autocast: 1/6.9 and 1/7.5,
# the issue asks 1/10). Each model exported, then two cold bf16 compiles in fresh processes with
# SINTER_LOG=compile (logs and weight-stripped models back for offline profiles); what
# max-autotune picks for ViT's erf-GELU products (SINTER_LOG=autotune).
source scripts/device_env.sh
MODELS=gpt2,vit_b_16
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --work /tmp/zoo --keep --exporters legacy --batch 8 --base \
  --no-torch-timing --iters 1 2>&1 | grep -E "PASS|FAIL" | cut -c1-200
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  python3 scripts/session12/strip_weights.py $f $OUT/$m.stripped.onnx > /dev/null 2>&1 || echo "strip $m failed"
  for rep in 1 2; do
    rm -rf /tmp/c1
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 90 $B run $f $ins --backend cuda --precision bf16 --out /tmp/o.npz > $OUT/$m-bf16-$rep.log 2>&1
    echo "$m bf16 cold $rep rc $?: $(grep -E "compiled in|per run" $OUT/$m-bf16-$rep.log | head -2 | tr '\n' ' ' | cut -c1-200)"
  done
  grep -E "backend_load|dynamic|constant_fold|schedule|NVRTC [0-9]|library|plans|setup|other" $OUT/$m-bf16-2.log | cut -c1-200 | head -16
done
f=/tmp/zoo/vit_b_16/legacy/model.onnx; ins=$(for i in /tmp/zoo/vit_b_16/input_*.npy; do echo -n "--input $i "; done)
SINTER_CACHE_DIR=/tmp/sc_at SINTER_LOG=autotune timeout 200 $B bench --backend cuda --model $f $ins --precision bf16 --mode max-autotune --no-calibrate > /tmp/at.log 2>&1; echo "autotune rc $?"
grep -E "^model|max-autotune" /tmp/at.log | grep -v autotune: | head -2 | cut -c1-160
grep -E "matmul_add_div[a-z_]*: chose" /tmp/at.log | head -4 | cut -c1-300
grep -E "matmul_add_div" /tmp/at.log | grep -v chose | head -10 | cut -c1-250
echo "== done ($SECONDS s)"
