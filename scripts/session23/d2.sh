#!/usr/bin/env bash
# Session 23, device call 2 (issue 13): exported multi-head attention without copies (constant
# gathers as slices, `schedule/consumer_order.rs`). (a) the CUDA shared suite (its new
# `multihead_attention_block`) and the attention device tests; (b) ViT-B/16, BERT-base and GPT-2
# small beside torch.compile in f32 and bf16; (c) ViT-B/16's kernels by kind.
# `CALL3=1` (`d3.sh`): ViT-B/16's bf16 kernels too, and `device_attention attention_matches` last
# in the time left instead of the whole binary in 150 s (it takes 200 s).
source scripts/device_env.sh
echo "== (a) suite ($SECONDS s)"
timeout 150 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
if [ "${CALL3:-0}" = 0 ]; then
  timeout 150 .cudatest/device_attention > /tmp/da.log 2>&1; echo "device_attention rc $?"; grep -E "^test result|FAILED|panicked" /tmp/da.log | head -6
fi
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 330 python3 onnx/models/zoo_check.py \
  --bin "$B" --models "${MODELS:-vit_b_16,bert,gpt2}" --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn|UserWarning" | cut -c1-300
echo "== (c) profile ($SECONDS s)"
f=/tmp/zoo/vit_b_16/legacy/model.onnx
timeout 90 $B profile --backend cuda --model $f --dim batch=8 --out /tmp/pv > /dev/null 2>&1; echo "profile rc $?"
python3 scripts/profile_kinds.py /tmp/pv/profile.json 14
for i in 1 2; do timeout 60 $B bench --backend cuda --model $f --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1; done
if [ "${CALL3:-0}" = 1 ]; then
  timeout 90 $B profile --backend cuda --model $f --dim batch=8 --precision bf16 --out /tmp/pvb > /dev/null 2>&1; echo "profile bf16 rc $?"
  python3 scripts/profile_kinds.py /tmp/pvb/profile.json 14
  echo "== (d) device_attention ($SECONDS s)"
  timeout $((570 - SECONDS)) .cudatest/device_attention attention_matches --test-threads=1 > /tmp/da.log 2>&1; echo "device_attention rc $?"
  grep -E "^test result|FAILED|panicked" /tmp/da.log | head -6
fi
echo "== done ($SECONDS s)"
