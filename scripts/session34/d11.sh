#!/usr/bin/env bash
# Session 34, device call 11: the L2 clear's size. `bench` clears twice the L2 the driver reports;
# the device test's loop cleared 100 MiB, the anchor's do_bench zeroes 256 MB. The d64 default
# timed alone after fills of 100 MiB, twice the reported L2, and 256 MiB; torch's SDPA likewise.
source scripts/device_env.sh
t=.cudatest/device_attention
L2=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).L2_cache_size)")
echo "L2 reported: $L2 bytes"
for r in 1 2; do
  for n in 104857600 $((2 * L2)) 268435456; do
    SINTER_TEST_FILL=normal SINTER_TEST_GAP_BYTES=$n SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c30-100 | sed "s/^/$r gap $n: /"
  done
  timeout 60 python3 scripts/session34/sdpa_gap.py 104857600 $((2 * L2)) 268435456 | sed "s/^/$r /"
  echo "$r bench: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"
done
echo "== done ($SECONDS s)"
