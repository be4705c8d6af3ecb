#!/usr/bin/env bash
# Session 36, device call 8: the tensor-core attention epilogue's 16-byte stores (quad exchange).
# Correctness: every tuning of the device test's attention cases against the interpreter, the
# shared suite on CUDA. Timing: `bench` old (session start) and new alternating on the three
# attention workloads, torch's SDPA (anchor, eager) and torch.compile's d64 between them.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "== correctness ($SECONDS s)"
timeout 330 $t --test-threads=1 attention_matches 2>&1 | grep -E "test result|FAILED|panicked|mismatch|engines|ok$" | tail -8
timeout 120 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -5
echo "== timing ($SECONDS s)"
W=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
for r in 1 2; do
  SINTER_CACHE_DIR=/tmp/sc_old timeout 120 $OLD bench --backend cuda --workload $W --no-calibrate --json $OUT/old_$r.json 2>&1 | grep -E "^attention" | awk -v r=$r '{print r" old "$1" "$4}'
  SINTER_CACHE_DIR=/tmp/sc_new timeout 120 $B bench --backend cuda --workload $W --no-calibrate --json $OUT/new_$r.json 2>&1 | grep -E "^attention" | awk -v r=$r '{print r" new "$1" "$4}'
  [ $r = 1 ] && timeout 150 python3 .bench/torch_anchor.py --modes eager,default --only attention_b8h16s1024d64_bf16,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --out $OUT/torch.json 2>&1 | grep -vE "^\s*$" | tail -8
done
python3 .bench/compare.py $OUT/torch.json $OUT/new_1.json $OUT/new_2.json 2>&1 | tail -12
echo "== done ($SECONDS s)"
