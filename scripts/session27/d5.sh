#!/usr/bin/env bash
# Session 27, device call 5: ViT-B/16, GPT-2 small and BERT-base (f32, batch 8) through WGSL with
# 64x128 matmul tiles only from 256 of them (old = call 4's build: from 128), alternating; ViT's
# max-autotune for what it picks.
source scripts/device_env.sh
zoo_export gpt2,bert,vit_b_16
export SINTER_REQUIRE_GPU=1
for m in vit_b_16 gpt2 bert; do
  d=/tmp/zoo/$m; bins=""; for i in $d/input_*.npy; do bins="$bins --input $i"; done
  echo "== $m ($SECONDS s)"
  for r in 1 2; do
    SINTER_CACHE_DIR=/tmp/sc_w timeout 100 $B bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/w_${m}_$r.json 2>&1 | grep -E "^model" | cut -c1-100 | sed 's/^/new /'
    SINTER_CACHE_DIR=/tmp/sc_o timeout 100 $OLD bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate 2>&1 | grep -E "^model" | cut -c1-100 | sed 's/^/old /'
  done
done
d=/tmp/zoo/vit_b_16; bins=""; for i in $d/input_*.npy; do bins="$bins --input $i"; done
SINTER_CACHE_DIR=/tmp/sc_t timeout 300 $B bench --backend wgsl --mode max-autotune --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/w_vit_tuned.json 2>&1 | grep -E "^model" | cut -c1-100 | sed 's/^/max-autotune /'
echo "== done ($SECONDS s)"
