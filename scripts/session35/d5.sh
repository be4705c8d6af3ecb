#!/usr/bin/env bash
# Session 35, device call 5: session 34's clusters of two sharing K and V by TMA multicast
# (half the default's L2 reads; 2.6-3% slower in short timings) under sustained load, where the
# default and cuDNN's kernel both reach the power cap (call 4: 0.0912-0.0927 against SDPA's
# 0.0871-0.0899). Each tile back to back after 3 and 15000 launches, and after an L2 clear;
# torch's SDPA alike; NVML beside the sustained ones. Correctness: the cluster tile against the
# interpreter (the device test's attention cases).
source scripts/device_env.sh
t=.cudatest/device_attention
poll() { timeout 20 python3 scripts/session35/nvml_poll.py $1 "$2" > /tmp/poll.txt & P=$!; }
ms() { grep TFLOP | head -1 | grep -oE "[0-9.]+ ms"; }
D="wgmma-tma-persistent 64x128 wg1+1 s3"; C="wgmma-tma-cluster 64x128 wg1+1 s3"
echo "== correctness ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma-cluster" timeout 200 $t --test-threads=1 attention_matches 2>&1 | grep -E "test result|FAILED|panicked|mismatch" | head -8
for r in 1 2; do
  for w in 3 15000; do
    for tile in "$D" "$C"; do
      poll 5 "  poll"
      echo "$r ${tile%% 64x128*} warm $w: $(SINTER_TEST_WARM_LAUNCHES=$w SINTER_TEST_FILL=workload SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$tile" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | ms)"
      wait $P; [ $w = 15000 ] && cat /tmp/poll.txt
    done
    timeout 60 python3 scripts/session35/sdpa_sustained.py $w | sed "s/^/$r /"
  done
  for tile in "$D" "$C"; do
    echo "$r ${tile%% 64x128*} after clear: $(SINTER_TEST_FILL=workload SINTER_TEST_GAP_BYTES=125829120 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$tile" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | ms)"
  done
  timeout 60 python3 scripts/session34/sdpa_gap.py 125829120 | sed "s/^/$r /"
done
echo "== done ($SECONDS s)"
