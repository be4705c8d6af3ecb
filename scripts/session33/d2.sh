#!/usr/bin/env bash
# Session 33, device call 2: every max-autotune candidate of the d64 attention workload with its
# time (SINTER_LOG=autotune, L2 cleared before each), twice, beside torch's SDPA back to back.
source scripts/device_env.sh
for r in 1 2; do
  echo "-- max-autotune round $r ($SECONDS s)"
  SINTER_LOG=autotune SINTER_CACHE_DIR=/tmp/sc_at$r timeout 200 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --mode max-autotune --no-cache --no-calibrate 2>&1 | grep -vE "^#|^\s*$" | sed -E 's/\x1b\[[0-9;]*m//g; s/Tuning \{ block: None, vectorize: None, persistent: None, tile: None, mma: None, library: None, //; s/, split_k: None, groups: None \}//; s/DEBUG sinter::autotune: k0_attention_matmul_mul_softmax: //' | cut -c1-400 | tail -60
done
(cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -2)
echo "== done ($SECONDS s)"
