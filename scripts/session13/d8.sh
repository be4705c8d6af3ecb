#!/usr/bin/env bash
# Session 13, device call 8 (issue 12): where the d64 attention tiles' warps wait (ncu stall
# reasons per issued instruction) for the default one-warpgroup tile and the two TMA ping-pong
# tiles, to direct the next attention work. Launches the rendered kernels directly.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
t=.cudatest/device_attention
m=""
for r in barrier gmma long_scoreboard math_pipe_throttle mio_throttle short_scoreboard wait not_selected selected dispatch_stall branch_resolving no_instruction sleeping lg_throttle membar; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
m="${m#,},sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum"
for f in "wgmma 64x128 wg1 s2" "wgmma-tma 64x128 wg1+1 s3" "wgmma-tma 128x128 wg2+1 s3"; do
  echo "-- $f"
  SINTER_TEST_TUNINGS="$f" timeout 100 ncu --kernel-name regex:attention --launch-count 1 --metrics "$m" \
    $t --ignored --test-threads=1 attention_timing > /tmp/ncu.txt 2>&1 || echo "ncu rc $?"
  grep -E "stalled|pct|duration|\(2048|\(1024" /tmp/ncu.txt | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $NF}' | head -24
done
