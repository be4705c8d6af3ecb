#!/usr/bin/env bash
# Session 27, device call 3: (a) GPT-2 small and BERT-base through WGSL with the new default
# matmul tiles (half-height 32x64 where 64x128 gives fewer than 128 tiles), default and
# max-autotune; (b) every attention tile max-autotune times for the d64 and causal d128
# workloads through WGSL (SINTER_LOG=autotune), against the three-kernel path.
source scripts/device_env.sh
zoo_export gpt2,bert
export SINTER_REQUIRE_GPU=1
for m in gpt2 bert; do
  d=/tmp/zoo/$m; bins=""; for i in $d/input_*.npy; do bins="$bins --input $i"; done
  echo "== (a) $m wgsl default x2, old default ($SECONDS s)"
  for r in 1 2; do
    SINTER_CACHE_DIR=/tmp/sc_w timeout 100 $B bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/w_${m}_$r.json 2>&1 | grep -E "^model" | cut -c1-120
    SINTER_CACHE_DIR=/tmp/sc_o timeout 100 $OLD bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate 2>&1 | grep -E "^model" | cut -c1-120 | sed 's/^/old /'
  done
done
echo "== (b) WGSL attention tiles ($SECONDS s)"
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  SINTER_CACHE_DIR=/tmp/sc_at SINTER_LOG=autotune timeout 200 $B bench --backend wgsl --mode max-autotune --workload $w --no-calibrate > /tmp/at.log 2>&1
  sed 's/\x1b\[[0-9;]*m//g' /tmp/at.log | grep -E "^$w" | cut -c1-120
  sed 's/\x1b\[[0-9;]*m//g' /tmp/at.log | grep -E "attn_tile: Some|attn_keys: Some|chose" | sed -E 's/.*attn_tile: (Some\(AttnTile \{[^}]*\}\)|None).*attn_keys: ([^,]*).*\}:? ?(.*)/\1 keys \2 \3/' | cut -c1-160 | head -20
done
echo "== done ($SECONDS s)"
