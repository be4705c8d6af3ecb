#!/usr/bin/env bash
# Session 24, device call 1 (issues 12, 13): GPT-2 small under bf16 autocast with torch's NaN guard
# outside the cast now matched as attention (7e8a71a, not yet timed), beside torch.compile in the
# same call, f32 and bf16; where GPT-2's and ViT-B/16's time goes by kernel kind (the split
# epilogues of their products: the baseline for cuBLASLt's residual epilogue).
source scripts/device_env.sh
echo "== (a) GPT-2 zoo ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn" | cut -c1-300
f=/tmp/zoo/gpt2/legacy/model.onnx
ins=$(for i in /tmp/zoo/gpt2/input_*.npy; do echo -n "--input $i "; done)
for p in bf16 f32; do
  echo "== (b) GPT-2 $p profile ($SECONDS s)"
  timeout 90 $B profile --backend cuda --model $f $ins --precision $p --out /tmp/pg_$p > /dev/null 2>&1; echo "profile rc $?"
  python3 scripts/profile_kinds.py /tmp/pg_$p/profile.json 16
  grep -o '"reason": "[^"]*attention[^"]*"' /tmp/pg_$p/fusion.json | sort | uniq -c | head -8
done
echo "== (c) ViT-B/16 f32 ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 200 python3 onnx/models/zoo_check.py \
  --bin "$B" --models vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing --iters 3 2>&1 | grep -E "PASS|FAIL" | cut -c1-200
fv=/tmp/zoo/vit_b_16/legacy/model.onnx
timeout 90 $B profile --backend cuda --model $fv --dim batch=8 --out /tmp/pv > /dev/null 2>&1; echo "profile rc $?"
python3 scripts/profile_kinds.py /tmp/pv/profile.json 16
echo "== done ($SECONDS s)"
