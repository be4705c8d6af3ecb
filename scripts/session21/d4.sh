#!/usr/bin/env bash
# Session 21, device call 4: (a) the shared suite and split rows in every mode on the narrowed
# decode rule; (b) sum_64M with a row's blocks on consecutive chunks (default) against blocks
# interleaved step by step (SINTER_SPLIT_INTERLEAVE=1, an experiment; its own cache), each in
# `bench` and under ncu, beside torch's sums; the decode attention in `bench` beside torch's SDPA.
source scripts/device_env.sh
echo "== (a) checks ($SECONDS s)"
timeout 240 .cudatest/suite --test-threads=4 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "test result|FAILED|panicked" /tmp/suite.log | head -8
timeout 120 .cudatest/device split_rows --test-threads=1 2>&1 | grep -E "test result|FAILED|panicked" | head -5
SINTER_SPLIT_INTERLEAVE=1 SINTER_CACHE_DIR=/tmp/sc2 timeout 120 .cudatest/device split_rows --test-threads=1 2>&1 | grep -E "test result|FAILED|panicked" | head -5
echo "== (b) timing ($SECONDS s)"
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
for rep in 1 2; do
  timeout 60 $B bench --backend cuda --workload sum_64M_f32,attention_decode_b32h32kv4096d128_bf16 --no-calibrate 2>&1 | grep -E "^(sum|attention)" | sed "s/^/chunked $rep: /"
  SINTER_SPLIT_INTERLEAVE=1 SINTER_CACHE_DIR=/tmp/sc2 timeout 60 $B bench --backend cuda --workload sum_64M_f32 --no-calibrate 2>&1 | grep -E "^sum" | sed "s/^/interleaved $rep: /"
done
for v in 0 1; do
  SINTER_SPLIT_INTERLEAVE=$v SINTER_CACHE_DIR=/tmp/sc_$v timeout 90 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 6 --launch-count 2 --metrics $M \
    $B bench --backend cuda --workload sum_64M_f32 --iters 8 --warmup 2 --no-calibrate 2>&1 | grep -E "  (gpu|dram|sm)__" | sed "s/^/interleave=$v /" | cut -c1-110
done
(cd scripts && timeout 150 python3 torch_reads.py 2>&1 | grep -E "do_bench")
echo "== done ($SECONDS s)"
