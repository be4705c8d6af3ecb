#!/usr/bin/env bash
# Session 14, device call 2: (a) the fixed max-autotune test; (b) issue 11: every TMA matmul tile
# (clusters of two with B multicast, and the single-block tiles with descriptors advanced by an
# add) against the interpreter at the awkward shapes, then timed at 8192^3 bf16 beside torch's
# cuBLAS, ncu counters of the cluster tile; (c) issue 12: the attention tiles (descriptors advanced
# by an add) checked and timed beside torch's SDPA.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) ($SECONDS s)"
timeout 100 .cudatest/device --test-threads=1 identical_kernels > /tmp/a.log 2>&1; echo "rc $?"; grep -E "^test |test result|panicked" /tmp/a.log | head
echo "== (b) TMA tiles vs the interpreter ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma" timeout 300 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches_the_interpreter_with_every_tuning > /tmp/b1.log 2>&1; echo "rc $?"
grep -c " ok$" /tmp/b1.log; grep -E "FAILED|test result|panicked|trap|error" /tmp/b1.log | head -20
timeout 100 .cudatest/device_matmul --test-threads=1 tma_tensor_maps_follow_moved_operands > /tmp/b2.log 2>&1; echo "moved rc $?"
echo "-- timings ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma 128x256,wgmma-tma 256x128" timeout 150 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings > /tmp/b3.log 2>&1; echo "rc $?"
grep -E "TFLOP|test result|panicked" /tmp/b3.log
python3 scripts/torch_matmul.py
SINTER_TEST_TUNINGS="wgmma-tma 128x256x64 c2 s4 cluster" timeout 150 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings 2>&1 | grep TFLOP
python3 scripts/torch_matmul.py
m=""
for r in barrier gmma long_scoreboard mio_throttle wait; do m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
m="${m#,},sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,sm__cycles_elapsed.avg.per_second"
echo "-- ncu: cluster 128x256 s4"
SINTER_TEST_TUNINGS="wgmma-tma 128x256x64 c2 s4 cluster" timeout 120 ncu --clock-control none --launch-count 1 --metrics "$m" \
  .cudatest/device_matmul --ignored --test-threads=1 wgmma_tile_timings > /tmp/ncu1.txt 2>&1 || echo "ncu rc $?"
grep -E "stalled|pct|duration|per_second|grid|cluster" /tmp/ncu1.txt | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF-1), $NF}'
echo "== (c) attention ($SECONDS s)"
t=.cudatest/device_attention
F="wgmma 64x128 wg1 s2,wgmma-tma 128x128 wg2+1 s3,wgmma-ov 128x128 wg2 s3,mma 128x64 w4 s3,wgmma-pp 128x128 wg2+1 s3,wgmma-tma 64x128 wg1+1 s3"
SINTER_TEST_TUNINGS="$F" timeout 150 $t --test-threads=1 --nocapture attention_matches > /tmp/c1.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/c1.log; grep -E "FAILED|^test result" /tmp/c1.log | head -8
SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/c2.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/c2.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit"
python3 scripts/torch_sdpa.py
cp /tmp/b1.log /tmp/b3.log /tmp/c1.log /tmp/c2.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
