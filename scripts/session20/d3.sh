#!/usr/bin/env bash
# Session 20, device call 3 (issue 13): the bf16 cold compile after call 2's findings (autocast's
# weight casts folded directly and in parallel; a dynamic refusal recorded in the cache; bf16/f16
# rounding from f64 corrected in the reference). The CUDA shared suite against the interpreter,
# then per model, each a fresh process: bf16 cold, bf16 warm, f32 cold, f32 warm with
# SINTER_LOG=compile (logs in $OUT/logs.tar.gz); ViT-B/16's structure without weights.
source scripts/device_env.sh
echo "== (a) suite ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
MODELS=vit_b_16,gpt2,resnet50,bert
echo "== (b) export ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --work /tmp/zoo --keep --exporters legacy --batch 8 --base \
  --no-torch-timing 2>&1 | grep -E "legacy +dynamic|legacy +static|FAIL" | cut -c1-200
echo "== (c) compiles ($SECONDS s)"
mkdir -p /tmp/logs
python3 scripts/session12/strip_weights.py /tmp/zoo/vit_b_16/legacy/model.onnx $OUT/vit_b_16.stripped.onnx > /dev/null 2>&1 || echo "strip failed"
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx
  ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for run in bf16-cold bf16-warm f32-cold f32-warm; do
    case $run in *-cold) rm -rf /tmp/c1;; esac
    p=${run%-*}
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 90 $B run $f $ins --backend cuda --precision $p --out /tmp/o.npz > /tmp/logs/$m-$run.log 2>&1
    echo "$m $run rc $?: $(grep -E "compile [0-9.]+ s|per run" /tmp/logs/$m-$run.log | head -1 | cut -c1-160)"
    grep -E "compiled in" /tmp/logs/$m-$run.log | grep INFO | sed 's/\x1b\[[0-9;]*m//g' | sed 's/^.*compiled in/   compiled in/' | cut -c1-230
  done
done
echo "== (d) the zoo harness's first run of a model, broken down ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_zoo2 timeout 150 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,resnet50 --work /tmp/zoo2 --exporters legacy --batch 8 --base \
  --no-torch-timing 2>&1 | grep -E "legacy +dynamic|compiled in|cuda load" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-400
cp /tmp/suite.log /tmp/logs/; tar czf $OUT/logs.tar.gz -C /tmp logs
echo "== done ($SECONDS s)"
