#!/usr/bin/env bash
# Session 34, device call 2: the clustered attention tile (`AttnTile::cluster`, two blocks per
# cluster sharing K and V through TMA multicast, a static order over pairs of row tiles).
# (a) Every cluster tuning against the interpreter (every case of the device test); (b) max-
# autotune's timer over the d64 candidates, twice; (c) back to back beside the persistent default
# and torch's SDPA; (d) flushed, one call: the anchor's SDPA (eager) and `bench` (default and
# max-autotune) alternating.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "== (a) clusters against the interpreter ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma-cluster" timeout 200 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked|mismatch|trap|error" /tmp/a.log | head -12
grep -oE "attention wgmma-tma-cluster [0-9x]+ wg[0-9]\+1 s[0-9]" /tmp/a.log | sort | uniq -c
echo "-- suite: $(timeout 100 .cudatest/suite attention 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "== (b) max-autotune, twice ($SECONDS s)"
for r in 1 2; do
  SINTER_LOG=autotune SINTER_CACHE_DIR=/tmp/sc_at$r timeout 200 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --mode max-autotune --no-cache --no-calibrate 2>&1 | sed -E 's/\x1b\[[0-9;]*m//g' | grep -E "AttnTile|attn: None|^attention" | grep -E "bm: 64|attn: None|^attention" | sed -E "s/.*DEBUG sinter::autotune: (k0[a-z_]*): .*attn: /\1 /; s/, split_k.*\}: / /" | sed "s/^/$r /" | sort -u | head -20
done
echo "== (c) back to back ($SECONDS s)"
F="wgmma-tma-persistent 64x128 wg1+1 s3,wgmma-tma-cluster 64x128 wg1+1 s3"
for r in 1 2; do
  SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
  grep TFLOP /tmp/b.log | cut -c1-120
done
(cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -1)
echo "== (d) flushed, alternating ($SECONDS s)"
for r in 1 2 3; do
  (cd .bench && timeout 120 python3 torch_anchor.py --only attention_b8h16s1024d64_bf16 --modes eager --out /tmp/anchor$r.json 2>&1 | grep -E "^attention")
  SINTER_CACHE_DIR=/tmp/sc_def timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | cut -c1-100
  SINTER_CACHE_DIR=/tmp/sc_at1 timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --mode max-autotune --no-calibrate 2>&1 | grep -E '^attention' | cut -c1-100
done
echo "== done ($SECONDS s)"
