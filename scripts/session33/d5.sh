#!/usr/bin/env bash
# Session 33, device call 5: the persistent attention tiles' producer prefetching the next work
# tile's Q rows into L2 (each Q tile is read once: its copies at the tile's start waited on DRAM).
# (a) Every persistent tuning against the interpreter, the suite; (b) old (HEAD 52e92a1) / new
# `bench` in turn, d64 (persistent default) and causal (fixed-grid default, unchanged), flushed;
# ncu of the new d64 kernel, one flushed launch.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "== (a) against the interpreter ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma-persistent" timeout 200 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked|mismatch" /tmp/a.log | head -12
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "== (b) old / new ($SECONDS s)"
for r in 1 2 3; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  SINTER_CACHE_DIR=/tmp/sc_$v$r timeout 100 $b bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --no-calibrate 2>&1 | grep -E "^attention" | awk -v v=$v -v r=$r '{print r, v, $1, $4, $8}'
done; done
for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  SINTER_CACHE_DIR=/tmp/sc_ncu$v timeout 120 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 3 --launch-count 3 --metrics gpu__time_duration.sum $b bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E "gpu__time" | sed "s/^/$v /"
done
(cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -1)
echo "== done ($SECONDS s)"
