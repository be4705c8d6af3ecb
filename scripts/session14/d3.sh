#!/usr/bin/env bash
# Session 14, device call 3 (issue 11): the cluster tiles with the peer's release at the default
# (CTA) scope instead of release.cluster: checked against the interpreter, timed beside the
# single-block tiles and torch's cuBLAS, ncu counters (with the membar stall).
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SINTER_TEST_TUNINGS="cluster" timeout 200 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches_the_interpreter_with_every_tuning > /tmp/b1.log 2>&1; echo "check rc $?"
grep -c " ok$" /tmp/b1.log; grep -E "FAILED|test result|panicked" /tmp/b1.log | head -10
SINTER_TEST_TUNINGS="wgmma-tma 128x256,wgmma-tma 256x128" timeout 150 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings > /tmp/b3.log 2>&1; echo "rc $?"
grep -E "TFLOP|panicked" /tmp/b3.log
python3 scripts/torch_matmul.py
m=""
for r in barrier membar gmma long_scoreboard wait sleeping; do m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
m="${m#,},sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum"
for f in "wgmma-tma 128x256x64 c2 s4 cluster" "wgmma-tma 128x256x64 c2 s3"; do
  echo "-- ncu: $f"
  SINTER_TEST_TUNINGS="$f" timeout 120 ncu --clock-control none --launch-count 1 --metrics "$m" \
    .cudatest/device_matmul --ignored --test-threads=1 wgmma_tile_timings > /tmp/ncu1.txt 2>&1 || echo "ncu rc $?"
  grep -E "stalled|pct|duration|per_second|inst_executed" /tmp/ncu1.txt | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF-1), $NF}'
done
cp /tmp/b1.log /tmp/b3.log $OUT/
echo "== done ($SECONDS s)"
