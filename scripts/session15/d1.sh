#!/usr/bin/env bash
# Session 15, device call 1 (issue 12): the persistent warp-specialized attention tiles (and the
# epilogue's one division per row in every tensor-core template) against the interpreter, then
# timed beside the current defaults and torch's SDPA; ncu counters of the persistent causal tile.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t=.cudatest/device_attention
echo "== (a) against the interpreter ($SECONDS s)"
F="wgmma-tma-persistent,wgmma-tma 128x128 wg2+1 s3,wgmma 64x128 wg1 s2,wgmma-ov 128x128 wg2 s3,mma 128x64 w4 s3"
SINTER_TEST_TUNINGS="$F" timeout 280 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked|rror" /tmp/a.log | head -12; tail -3 /tmp/a.log
echo "== (b) timing ($SECONDS s)"
F="wgmma-tma-persistent,wgmma-tma 128x128 wg2+1 s3,wgmma 64x128 wg1 s2"
SINTER_TEST_TUNINGS="$F" timeout 200 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit"
python3 scripts/torch_sdpa.py
echo "== (c) ncu, persistent 128x128 s3 at causal d128 ($SECONDS s)"
m=""
for r in barrier gmma long_scoreboard mio_throttle wait math_pipe_throttle; do m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
m="${m#,},sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__cycles_elapsed.avg.per_second"
for tile in "wgmma-tma-persistent 128x128 wg2+1 s3" "wgmma-tma 128x128 wg2+1 s3"; do
  echo "-- $tile"
  SINTER_TEST_TUNINGS="$tile" timeout 120 ncu --clock-control none -k regex:attention --launch-skip 103 --launch-count 1 --metrics "$m" \
    $t --ignored --test-threads=1 attention_timing > /tmp/ncu.txt 2>&1 || echo "ncu rc $?"
  grep -E "stalled|pct|duration|per_second|grid|registers" /tmp/ncu.txt | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF-1), $NF}'
done
cp /tmp/a.log /tmp/b.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
