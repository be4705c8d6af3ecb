#!/usr/bin/env bash
# Session 35, device call 4: call 3's missing figure (its `cut` dropped the default tile's time):
# sinter's default d64 tile after 3 and 15000 back-to-back launches, timed back to back, beside
# torch's SDPA alike; then `bench`'s whole row and the loop after an L2 clear, alternating.
source scripts/device_env.sh
t=.cudatest/device_attention
T="wgmma-tma-persistent 64x128 wg1+1 s3"
poll() { timeout 20 python3 scripts/session35/nvml_poll.py $1 "$2" > /tmp/poll.txt & P=$!; }
ms() { grep TFLOP | head -1 | grep -oE "[0-9.]+ ms"; }
for r in 1 2; do
  for w in 3 15000; do
    poll 6 "  poll"
    echo "$r default warm $w: $(SINTER_TEST_WARM_LAUNCHES=$w SINTER_TEST_FILL=workload SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$T" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | ms)"
    wait $P; cat /tmp/poll.txt
    timeout 60 python3 scripts/session35/sdpa_sustained.py $w | sed "s/^/$r /"
  done
done
for r in 1 2; do
  echo "$r loop after clear: $(SINTER_TEST_FILL=workload SINTER_TEST_GAP_BYTES=125829120 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$T" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | ms)"
  SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^(workload|attention)' | sed "s/^/$r bench: /"
done
echo "== done ($SECONDS s)"
