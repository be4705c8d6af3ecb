#!/usr/bin/env bash
# Session 14, device call 1: (a) the max-autotune rework's device tests (identical kernels
# searched once); (b) issue 11: the TMA matmul template's 128x256 tiles beside torch's cuBLAS at
# 8192^3 bf16, and ncu counters of both (tensor pipe, L2, DRAM, stalls, cuBLAS's kernel name: its
# cluster shape); (c) issue 12: ncu's source view (SASS, stall samples per instruction) of the d64
# default attention tile.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) max-autotune device tests ($SECONDS s)"
timeout 150 .cudatest/device --test-threads=1 --nocapture identical_kernels timing_sources_and_autotune_cache > /tmp/a.log 2>&1; echo "rc $?"
grep -E "^test |test result|panicked|chose|cached" /tmp/a.log | head -20
echo "== (b) matmul 8192^3 bf16 ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma 128x256" timeout 120 .cudatest/device_matmul --ignored --nocapture --test-threads=1 wgmma_tile_timings > /tmp/b.log 2>&1; echo "rc $?"
grep -E "TFLOP|test result|panicked" /tmp/b.log
python3 scripts/torch_matmul.py
m=""
for r in barrier gmma long_scoreboard math_pipe_throttle mio_throttle short_scoreboard wait not_selected selected dispatch_stall sleeping lg_throttle membar; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
m="${m#,},sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum.per_second,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y,sm__cycles_elapsed.avg.per_second"
echo "-- ncu: sinter wgmma-tma 128x256x64 c2 s4"
SINTER_TEST_TUNINGS="wgmma-tma 128x256x64 c2 s4" timeout 120 ncu --clock-control none --launch-count 1 --metrics "$m" \
  .cudatest/device_matmul --ignored --test-threads=1 wgmma_tile_timings > /tmp/ncu1.txt 2>&1 || echo "ncu rc $?"
grep -E "^  [a-z_]+.*\(|stalled|pct|duration|per_second|grid|cluster" /tmp/ncu1.txt | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF-1), $NF}' | head -40
echo "-- ncu: torch cuBLAS"
timeout 120 ncu --clock-control none --launch-skip 3 --launch-count 1 --metrics "$m" python3 scripts/torch_matmul.py > /tmp/ncu2.txt 2>&1 || echo "ncu rc $?"
grep -E "^  [a-zA-Z_].*\(|stalled|pct|duration|per_second|grid|cluster" /tmp/ncu2.txt | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF-1), $NF}' | head -40
echo "== (c) attention d64 source view ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma 64x128 wg1 s2" timeout 200 ncu --clock-control none --set full --import-source yes --kernel-name regex:attention --launch-count 1 -f -o /tmp/attn \
  .cudatest/device_attention --ignored --test-threads=1 attention_timing > /tmp/c.log 2>&1; echo "ncu rc $?"; tail -3 /tmp/c.log
ncu -i /tmp/attn.ncu-rep --page source --csv --print-source sass > /tmp/attn_sass.csv 2>/tmp/c2.log; echo "source rc $? $(wc -l < /tmp/attn_sass.csv) lines"; head -c 600 /tmp/c2.log
ncu -i /tmp/attn.ncu-rep --page details --csv > /tmp/attn_details.csv 2>/dev/null
gzip -c /tmp/attn_sass.csv > $OUT/attn_sass.csv.gz; gzip -c /tmp/attn_details.csv > $OUT/attn_details.csv.gz
cp /tmp/b.log $OUT/b.log; cp /tmp/a.log $OUT/a.log
echo "== done ($SECONDS s)"
