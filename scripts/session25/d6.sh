#!/usr/bin/env bash
# Session 25, device call 6 (issue 13): the library steps' plans built while NVRTC compiles
# (`library::prepare_plans`). (a) the suite, the library and device tests; (b) GPT-2, ViT-B/16
# and ResNet-50 exported and checked in bf16 (zoo), then two cold bf16 compiles each in fresh
# processes (SINTER_LOG=compile), and GPT-2 bf16 old (e72d2b9) and new in `bench`.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
timeout 200 .cudatest/device --test-threads 2 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "test result|panicked" -A2 /tmp/dev.log | cut -c1-600 | head -8
echo "== (b) models ($SECONDS s)"
MODELS=gpt2,vit_b_16,resnet50
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|vit_b_16|resnet50) " | grep -v "done in" | cut -c1-160
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for rep in 1 2; do
    rm -rf /tmp/c1
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 90 $B run $f $ins --backend cuda --precision bf16 --out /tmp/o.npz > /tmp/c.log 2>&1
    echo "$m bf16 cold $rep rc $?: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/c.log | grep -E "cuda load|compiled in" | head -2 | cut -c17-260 | tr '\n' ' ')"
  done
done
for r in 1 2; do for bin in old new; do ab_bench gpt2 bf16 $bin; done; done
echo "== done ($SECONDS s)"
