#!/usr/bin/env bash
# Session 36, device call 10: the cluster tile's row guard (a pair of tiles past m) at every tuning
# of the whole-tile products; the shared suite; `bench`'s d64 and causal attention beside torch's
# SDPA and torch.compile, alternating twice.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
timeout 170 .cudatest/device_matmul whole_tile_products 2>&1 | grep -E "test result|FAILED|panicked" | head -6
timeout 60 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -3
echo "== timing ($SECONDS s)"
W=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16
for r in 1 2; do
  SINTER_CACHE_DIR=/tmp/sc_new timeout 120 $B bench --backend cuda --workload $W --no-calibrate --json $OUT/new_$r.json 2>&1 | grep -E "^attention" | awk -v r=$r '{print r" new "$1" "$4}'
  timeout 120 python3 .bench/torch_anchor.py --modes eager,default --only attention_b8h16s1024d64_bf16,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16 --out $OUT/torch_$r.json 2>&1 | grep -E "^(attention|sdpa)" | sed "s/^/$r /"
done
echo "== done ($SECONDS s)"
