#!/usr/bin/env bash
# Session 27, device call 4: GPT-2 small, BERT-base and ViT-B/16 (f32, batch 8) through WGSL:
# the new build (32-row attention tiles below 1024 workgroups of 64 rows), the session's first
# build (old), and the new one with attention unfused (SINTER_FUSE_ATTENTION=0), alternating.
source scripts/device_env.sh
zoo_export gpt2,bert,vit_b_16
export SINTER_REQUIRE_GPU=1
for m in gpt2 bert vit_b_16; do
  d=/tmp/zoo/$m; bins=""; for i in $d/input_*.npy; do bins="$bins --input $i"; done
  echo "== $m ($SECONDS s)"
  for r in 1 2; do
    SINTER_CACHE_DIR=/tmp/sc_w timeout 100 $B bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/w_${m}_$r.json 2>&1 | grep -E "^model" | cut -c1-100 | sed 's/^/new /'
    SINTER_CACHE_DIR=/tmp/sc_o timeout 100 $OLD bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate 2>&1 | grep -E "^model" | cut -c1-100 | sed 's/^/old /'
    SINTER_FUSE_ATTENTION=0 SINTER_CACHE_DIR=/tmp/sc_u timeout 100 $B bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate 2>&1 | grep -E "^model" | cut -c1-100 | sed 's/^/unfused /'
  done
  python3 - $OUT/w_${m}_1.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
a = [c for c in r.get("contractions") or [] if c["kind"] == "attention"]
print(f"attention kernels {len(a)}: {sum(c['ms'] for c in a):.4f} ms in all; {a[0]['strategy'] if a else '-'}")
PY
done
echo "== done ($SECONDS s)"
