#!/usr/bin/env bash
# Session 36, device call 1: where the executable's ~1% on the d64 attention kernel comes from.
# In one test process each: the rendered kernel's loop (each launch after a fill) with the fill
# allocated before the case's buffers (as session 35 timed it) or after them (as the executable
# allocates its L2 clear), at 120 MiB or at twice the L2 (the executable's clear); the executable's
# test; `bench` with the CUDA log (its buffers' addresses). Twice, alternating.
source scripts/device_env.sh
t=.cudatest/device_attention
export SINTER_TEST_FILL=workload SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3"
raw() { # $1 label, $2 gap bytes, $3 gap-after
  SINTER_TEST_GAP_BYTES=$2 SINTER_TEST_GAP_AFTER=$3 timeout 120 $t --ignored --nocapture --test-threads=1 'attention_timing' --exact 2>&1 \
    | grep -E "TFLOP|^buffers" | sort -u | sed "s/^/$r $1: /" | cut -c1-200
}
for r in 1 2; do
  raw "fill first 120M" 125829120 0
  raw "fill after 120M" 125829120 1
  raw "fill after 100M" 104857600 1
  raw "fill first 100M" 104857600 0
  timeout 120 $t --ignored --nocapture --test-threads=1 through_the_executable 2>&1 | grep -E "executable," | sed "s/^/$r exe alone: /"
  SINTER_LOG=cuda SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate > /tmp/bench_$r.txt 2>&1
  echo "$r bench: $(grep -E '^attention' /tmp/bench_$r.txt | awk '{print $4}')"
  grep -E "memory |L2 clear" /tmp/bench_$r.txt | sort -u | sed "s/^/$r bench /" | cut -c1-160 | head -12
done
echo "== done ($SECONDS s)"
