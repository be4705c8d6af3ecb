#!/usr/bin/env bash
# Session 26, device call 7 (issue 13): the load with its library plans back on the load's thread
# (after the memory, beside NVRTC), old = 98f2927. (a) the suite, `device`, `device_dynamic`
# three times with two test threads (call 4's one failure); (b) GPT-2, BERT, ViT-B/16 exported
# and checked; (c) cold and warm bf16 compiles, old and new alternating (SINTER_LOG=compile).
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
timeout 150 .cudatest/device --test-threads 2 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "test result|panicked" -A2 /tmp/dev.log | cut -c1-400 | head -6
for rep in 1 2 3; do for v in new old; do
  t=.cudatest/device_dynamic; [ $v = old ] && t=.cudatest/device_dynamic_old
  timeout 120 $t --test-threads 2 > /tmp/t.log 2>&1; rc=$?
  echo "device_dynamic $v rep $rep rc $rc: $(grep -E '^test result' /tmp/t.log | cut -c1-40) $(grep -E 'panicked at' -A1 /tmp/t.log | head -2 | cut -c1-160 | tr '\n' ' ')"
done; done
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 200 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,bert,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|bert|vit_b_16) " | grep -v "done in" | cut -c1-160
echo "== (c) cold and warm compiles ($SECONDS s)"
for m in gpt2 bert vit_b_16; do
  d=/tmp/zoo/$m; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for rep in 1 2; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/cw_$v
    for run in cold warm; do
      SINTER_CACHE_DIR=/tmp/cw_$v SINTER_LOG=compile timeout 120 $b run $d/legacy/model.onnx $ins --backend cuda --precision bf16 > /tmp/r.log 2>&1
      c=$(sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -oE 'compiled in [0-9.]+ s[^:]*: .*' | cut -c1-140)
      l=$(sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -oE 'cuda load of [0-9]+ kernels in [0-9.]+ s' | head -1)
      echo "$m $v $rep $run: $c | $l"
    done
  done; done
done
echo "== done ($SECONDS s)"
