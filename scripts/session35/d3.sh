#!/usr/bin/env bash
# Session 35, device call 3: the d64 attention kernels under sustained load (call 2: 3000
# back-to-back launches of sinter's default brought the power cap, 0.0936 ms against 0.0852).
# After 3 and 15000 (~1.3 s) back-to-back launches, timed back to back: sinter's default (one
# consumer, K and V read per 64 rows), the persistent two-consumer tiles (K and V shared by 128
# rows: 40% of the L2 traffic), torch's SDPA; NVML's clock beside each.
source scripts/device_env.sh
t=.cudatest/device_attention
poll() { timeout 20 python3 scripts/session35/nvml_poll.py $1 "$2" > /tmp/poll.txt & P=$!; }
TS="wgmma-tma-persistent 64x128 wg1+1 s3,wgmma-tma-persistent 128x128 wg2+1 s2,wgmma-tma-persistent 128x128 wg2+1 s3"
for r in 1 2; do
  for w in 3 15000; do
    poll 8 "  poll"
    SINTER_TEST_WARM_LAUNCHES=$w SINTER_TEST_FILL=workload SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$TS" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | head -3 | cut -c32-100 | sed "s/^/$r warm $w: /"
    wait $P; cat /tmp/poll.txt
    poll 8 "  poll"; timeout 60 python3 scripts/session35/sdpa_sustained.py $w | sed "s/^/$r /"; wait $P; cat /tmp/poll.txt
  done
done
echo "== done ($SECONDS s)"
