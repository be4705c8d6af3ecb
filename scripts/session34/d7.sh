#!/usr/bin/env bash
# Session 34, device call 7: what a launch after other work costs the d64 kernel against cuDNN's.
# Each launch timed alone (events around it, median of 100) after a fill of 0, 1 MiB (the kernel
# before is a memset, L2 keeps the inputs) or 100 MiB (`bench`'s L2 clear); the back-to-back batch
# for reference. Sinter's default (persistent), the fixed-grid TMA tile, torch's SDPA.
source scripts/device_env.sh
t=.cudatest/device_attention
F="wgmma-tma-persistent 64x128 wg1+1 s3,wgmma-tma 64x128 wg1+1 s3"
for r in 1 2; do
  for n in b2b 0 1048576 104857600; do
    if [ $n = b2b ]; then e=""; else e="SINTER_TEST_GAP_BYTES=$n"; fi
    env $e SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -2 | cut -c30-100 | sed "s/^/$r gap $n: /"
  done
  timeout 60 python3 scripts/session34/sdpa_gap.py 0 1048576 104857600 | sed "s/^/$r /"
done
echo "== done ($SECONDS s)"
