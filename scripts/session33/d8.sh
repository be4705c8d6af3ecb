#!/usr/bin/env bash
# Session 33, device call 8 (experiment): the persistent two- and three-consumer attention tiles
# in cuDNN's order (S and its wait, then the softmax and P V inside the turn, P V waited before the
# next step; SINTER_EXP_SERIAL, this call only) against
# their free-running form (the persistent tiles' schedule since call 4): against the interpreter,
# every candidate's time under max-autotune, the device test's back-to-back timing.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "== (a) the serial order against the interpreter ($SECONDS s)"
F="wgmma-tma-persistent 128x128 wg2+1,wgmma-tma-persistent 192x64"
SINTER_EXP_SERIAL=1 SINTER_TEST_TUNINGS="$F" timeout 150 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked|mismatch" /tmp/a.log | head -12
echo "== (b) max-autotune, free / serial ($SECONDS s)"
for r in 1; do for v in free serial; do
  e=""; [ $v = serial ] && e="SINTER_EXP_SERIAL=1"
  env $e SINTER_LOG=autotune SINTER_CACHE_DIR=/tmp/sc_at$v$r timeout 200 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --mode max-autotune --no-cache --no-calibrate 2>&1 | sed -E 's/\x1b\[[0-9;]*m//g' | grep -E "AttnTile|attn: None|^attention" | grep -E "warps: (12|16)|attn: None\)?:|^attention" | sed -E "s/.*DEBUG sinter::autotune: (k0[a-z_]*): .*attn: /\1 /; s/, split_k.*\}: / /" | sed "s/^/$r $v /" | sort -u | head -30
done; done
echo "== (c) back to back ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 128x128 wg2+1 s3,wgmma-tma-persistent 64x128 wg1+1 s3"
for v in free serial; do
  e=""; [ $v = serial ] && e="SINTER_EXP_SERIAL=1"
  env $e SINTER_TEST_CASES="s1024 d64,s2048 d128" SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing $v rc $?"
  grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | cut -c1-110
done
(cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -3)
echo "== done ($SECONDS s)"
