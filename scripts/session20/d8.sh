#!/usr/bin/env bash
# Session 20, device call 8 (issue 13), the final tree (little device time left):
# ViT-B/16 and GPT-2 at bf16, cold and warm, each a fresh process, with the pass
# texts printed only for debug artifacts. The first process absorbs the machine's first loads.
source scripts/device_env.sh
OMP_WAIT_POLICY=PASSIVE timeout 60 python3 onnx/models/zoo_check.py --bin "$B" --models vit_b_16,gpt2 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --base --no-torch-timing --timeout 30 2>&1 | grep -E "legacy +dynamic" | cut -c1-160
for m in vit_b_16 gpt2; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  rm -rf /tmp/c1
  for run in cold warm; do
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 30 $B run $f $ins --backend cuda --precision bf16 --out /tmp/o.npz 2>&1 \
      | grep -E "INFO.*compiled in" | sed 's/\x1b\[[0-9;]*m//g' | sed "s/^.*compiled in/$m bf16 $run: compiled in/" | cut -c1-200
  done
done
echo "== done ($SECONDS s)"
