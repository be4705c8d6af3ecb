#!/usr/bin/env bash
# (The first run of this call waited forever: a bare `wait` also waits for the log's tee.)
# Session 35, device call 2: does `bench`'s warm-up (at least 50 ms of back-to-back runs) slow
# the d64 attention kernel's timed runs (power)? The test's loop on `bench`'s inputs after 3, 600
# (~50 ms) and 3000 (~250 ms) back-to-back launches; `bench`; torch's SDPA timed alike; NVML's
# SM clock, power and clock-event reasons polled beside each.
source scripts/device_env.sh
t=.cudatest/device_attention
T="wgmma-tma-persistent 64x128 wg1+1 s3"
poll() { timeout 20 python3 scripts/session35/nvml_poll.py $1 "$2" > /tmp/poll.txt & P=$!; }
loop() { SINTER_TEST_WARM_LAUNCHES=$1 SINTER_TEST_FILL=workload SINTER_TEST_GAP_BYTES=125829120 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$T" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c60-100; }
for r in 1 2; do
  for w in 3 600 3000; do
    poll 4 "  poll"; echo "$r loop warm $w: $(loop $w)"; wait $P; cat /tmp/poll.txt
  done
  poll 6 "  poll"; echo "$r bench: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"; wait $P; cat /tmp/poll.txt
  poll 8 "  poll"; timeout 60 python3 scripts/session34/sdpa_gap.py 125829120 | sed "s/^/$r /"; wait $P; cat /tmp/poll.txt
done
echo "== done ($SECONDS s)"
