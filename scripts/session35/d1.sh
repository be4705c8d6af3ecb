#!/usr/bin/env bash
# Session 35, device call 1: what `bench` adds to the d64 attention kernel (issue 12). The test's
# loop (each launch alone after a 120 MiB fill) on inputs drawn on the device against `bench`'s
# own inputs uploaded (SINTER_TEST_FILL=workload); `bench`; torch's SDPA timed alike; then the
# kernels' own durations from CUPTI (nsys) in `bench` and in the test's loop, no events.
source scripts/device_env.sh
t=.cudatest/device_attention
T="wgmma-tma-persistent 64x128 wg1+1 s3"
loop() { SINTER_TEST_FILL=$1 SINTER_TEST_GAP_BYTES=125829120 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$T" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c30-100; }
for r in 1 2; do
  echo "$r loop normal:   $(loop normal)"
  echo "$r loop workload: $(loop workload)"
  echo "$r bench: $(SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print $4}')"
  timeout 60 python3 scripts/session34/sdpa_gap.py 125829120 | sed "s/^/$r /"
done
if command -v nsys > /dev/null; then
  echo "== nsys ($SECONDS s)"
  SINTER_CACHE_DIR=/tmp/sc_a timeout 120 nsys profile -q -t cuda -o /tmp/n_bench -f true $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | awk '{print "bench under nsys: " $4}'
  python3 scripts/session35/nsys_last.py /tmp/n_bench.nsys-rep 100 | sed 's/^/bench: /'
  for f in normal workload; do
    SINTER_TEST_FILL=$f SINTER_TEST_GAP_BYTES=125829120 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="$T" timeout 120 nsys profile -q -t cuda -o /tmp/n_$f -f true $t --ignored --nocapture --test-threads=1 attention_timing > /dev/null 2>&1
    python3 scripts/session35/nsys_last.py /tmp/n_$f.nsys-rep 100 | sed "s/^/loop $f: /"
  done
  timeout 120 nsys profile -q -t cuda -o /tmp/n_sdpa -f true python3 scripts/session34/sdpa_gap.py 125829120 > /dev/null 2>&1
  python3 scripts/session35/nsys_last.py /tmp/n_sdpa.nsys-rep 100 | sed 's/^/sdpa: /'
else
  echo "no nsys: $(ls /usr/local/cuda/bin | tr '\n' ' ' | cut -c1-300)"
fi
echo "== done ($SECONDS s)"
