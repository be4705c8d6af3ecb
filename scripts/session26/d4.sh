#!/usr/bin/env bash
# Session 26, device call 4 (issue 13): a default-mode CUDA load uploads constants while NVRTC
# and the library plans run; a warm start's constants are resolved in parallel and not hashed
# twice (old = 98f2927, the import change). (a) the suite, `device`, `device_dynamic`; (b) GPT-2,
# BERT, ViT-B/16, ResNet-50 exported and checked (zoo); (c) cold and warm bf16 compiles, old and
# new alternating, each a fresh process (SINTER_LOG=compile): the compile and its load's parts.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
for t in device device_dynamic; do
  timeout 150 .cudatest/$t --test-threads 2 > /tmp/dev.log 2>&1; echo "$t rc $?"
  grep -E "test result|panicked" -A2 /tmp/dev.log | cut -c1-600 | head -8
done
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,bert,vit_b_16,resnet50 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|bert|vit_b_16|resnet50) " | grep -v "done in" | cut -c1-160
echo "== (c) cold and warm compiles ($SECONDS s)"
for m in gpt2 bert vit_b_16 resnet50; do
  d=/tmp/zoo/$m; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for rep in 1 2; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/cw_$v
    for run in cold warm; do
      SINTER_CACHE_DIR=/tmp/cw_$v SINTER_LOG=compile timeout 120 $b run $d/legacy/model.onnx $ins --backend cuda --precision bf16 > /tmp/r.log 2>&1
      c=$(sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -oE 'compiled in [0-9.]+ s: .*' | cut -c1-150)
      l=$(sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -oE 'cuda load of [0-9]+ kernels in [0-9.]+ s' | head -1)
      echo "$m $v $rep $run: $c | $l"
    done
  done; done
done
echo "== done ($SECONDS s)"
