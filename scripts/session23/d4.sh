#!/usr/bin/env bash
# Session 23, device call 4 (issue 13): BERT-base and GPT-2 small in bf16 measured 4% and 10% slower
# in call 3 than in call 2, across calls. Here before (`.bench/sinter_old`, 1e08c67: call 2's code)
# and after (HEAD: autocast's attention without copies) in one call, alternating: `bench --model
# --precision bf16`, and each one's kernels by kind (`sinter profile`).
source scripts/device_env.sh
echo "== export ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 200 python3 onnx/models/zoo_check.py \
  --bin "$B" --models bert,gpt2 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 10 2>&1 | grep -vE "this process|done in|warn|UserWarning" | cut -c1-200
for m in bert gpt2; do
  f=/tmp/zoo/$m/legacy/model.onnx
  dims=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  echo "== $m ($SECONDS s)"
  for r in 1 2; do for bin in old new; do ab_bench $m bf16 $bin; done; done
  for bin in old new; do
    b=$B; [ $bin = old ] && b=$OLD
    SINTER_CACHE_DIR=/tmp/sc_$bin timeout 60 $b profile --backend cuda --model $f $dims --precision bf16 --out /tmp/p_$bin > /dev/null 2>&1; echo "$bin profile rc $?"
    python3 scripts/profile_kinds.py /tmp/p_$bin/profile.json 0 | head -12
  done
done
echo "== done ($SECONDS s)"
