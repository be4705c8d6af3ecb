#!/usr/bin/env bash
# Session 33, device call 3: the warp-specialized attention tiles with the wait for each P V at the
# top of the next step (the softmax beside the P V in the SASS). (a) Every warp-specialized tuning
# against the interpreter, the suite; (b) old (HEAD 52e92a1) / new `bench` alternating, d64 and
# causal, flushed; every candidate's time under max-autotune (new); the device test's back-to-back
# timing of the warp-specialized tiles beside torch's SDPA.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "== (a) against the interpreter ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent,wgmma-pp 128x128 wg2+1 s3,wgmma-tma 64x128 wg1+1 s3"
SINTER_TEST_TUNINGS="$F" timeout 200 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked|mismatch" /tmp/a.log | head -12
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "== (b) old / new ($SECONDS s)"
for r in 1 2 3; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  SINTER_CACHE_DIR=/tmp/sc_$v$r timeout 100 $b bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --no-calibrate 2>&1 | grep -E "^attention" | awk -v v=$v -v r=$r '{print r, v, $1, $4, $8}'
done; done
SINTER_LOG=autotune SINTER_CACHE_DIR=/tmp/sc_at timeout 200 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --mode max-autotune --no-cache --no-calibrate 2>&1 | sed -E 's/\x1b\[[0-9;]*m//g' | grep -E "AttnTile|attn: None|^attention" | grep -E "Persistent|PingPongTma |attn: None|^attention" | sed -E 's/.*attn: //; s/, split_k.*\}: / /' | sort | uniq | head -30
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 128x128 wg2+1 s3,wgmma-tma-persistent 64x128 wg1+1 s3"
SINTER_TEST_CASES="s1024 d64,s2048 d128" SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}'
(cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -3)
cp /tmp/a.log /tmp/b.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
