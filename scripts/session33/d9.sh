#!/usr/bin/env bash
# Session 33, device call 9: attention scores without the masking branch when every tile is whole
# (rows and keys in whole tiles, no causal bound). (a) The whole-tile case (bf16 m128 kv128 d64)
# over every tuning against the interpreter, the suite's attention cases; (b) old (HEAD 52e92a1) /
# new `bench` d64 in turn (run ms, cold s).
source scripts/device_env.sh
echo "-- whole-tile case, every tuning: $(SINTER_TEST_CASES="bf16 m128 kv128 d64" timeout 100 .cudatest/device_attention attention_matches 2>&1 | grep -E '^test result|FAILED|panicked|mismatch' | head -5)"
echo "-- suite attention: $(timeout 60 .cudatest/suite attention 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
for r in 1 2; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  SINTER_CACHE_DIR=/tmp/sc_$v$r timeout 60 $b bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E "^attention" | awk -v v=$v -v r=$r '{print r, v, $1, $4, $8}'
done; done
echo "== done ($SECONDS s)"
