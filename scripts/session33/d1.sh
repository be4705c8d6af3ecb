#!/usr/bin/env bash
# Session 33, device call 1. (a) The reviewed cuBLASLt warm-up (Device::new in the backend's
# library thread, never run on a GPU): the suite, `device`'s library tests with and without the
# libraries, matmul_4096_f32 / mlp cold compiles with their plan split. (b) The driver's own
# launch cost on this host (scripts/session33/launch_floor.cu), against `device`'s host-overhead
# test. (c) The d64 attention kernel against torch's SDPA kernel under ncu, one flushed launch
# each, with the sections that say where each waits; sinter's SASS with per-instruction stalls.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
for lib in 1 0; do
  echo "-- device (SINTER_CUDA_LIBRARY=$lib): $(SINTER_CUDA_LIBRARY=$lib timeout 150 .cudatest/device 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
done
for r in 1 2; do for w in matmul_4096_f32 mlp_8192x4096x16384_bf16; do
  echo "-- cold $w round $r"
  SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_cold_$r$w timeout 100 $B bench --backend cuda --workload $w --no-calibrate 2>&1 | grep -E "^(matmul|mlp)|plan|compile " | cut -c1-180 | head -6
done; done
echo "== (b) launch floor ($SECONDS s)"
nvcc -O2 -arch=sm_90a -o /tmp/lf scripts/session33/launch_floor.cu -lcuda 2>&1 | tail -3
/tmp/lf
/tmp/lf | head -4
timeout 100 .cudatest/device host_overhead_and_calibration --nocapture 2>&1 | grep -E "host overhead|^test result|FAILED|panicked" | head -8
echo "== (c) ncu d64 ($SECONDS s)"
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats --section InstructionStats"
SINTER_CACHE_DIR=/tmp/sc_ncu timeout 120 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 3 --launch-count 1 $SEC --section SourceCounters -o $OUT/sinter_d64 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate > /dev/null 2>&1
timeout 120 ncu --cache-control all --clock-control none -k regex:"sdpa|flash|fmha|attn|fprop" --launch-skip 20 --launch-count 1 $SEC --section SourceCounters -o $OUT/torch_d64 python3 scripts/session33/sdpa_d64.py > /dev/null 2>&1
for r in sinter_d64 torch_d64; do
  echo "---- $r"
  ncu --import $OUT/$r.ncu-rep --print-units base 2>&1 | grep -vE "^\s*$|----" | cut -c1-150 > $OUT/$r.txt
  grep -E "^  [a-zA-Z_0-9]+|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Theoretical Occ|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|L2 Hit|L1/TEX Hit|Memory Throughput|DRAM Throughput|Compute \(SM\)|Executed Instructions  |Shared Memory Configuration|Dynamic Shared|Stall|Mem Busy|Max Bandwidth|L2 Compression" $OUT/$r.txt | head -60
  ncu --import $OUT/$r.ncu-rep --page raw --csv 2>/dev/null | python3 -c '
import sys, csv
rows = list(csv.reader(sys.stdin))
h, u, v = rows[0], rows[1], rows[2]
want = ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
  "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
  "lts__t_sector_hit_rate.pct", "lts__t_sectors.sum", "dram__bytes_read.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
  "smsp__inst_executed.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
  "gpu__time_duration.sum", "launch__registers_per_thread", "launch__grid_size", "launch__block_size")
for i, name in enumerate(h):
    if name in want or "warp_issue_stalled" in name and name.endswith("per_warp_active.pct"):
        print(f"   {name} = {v[i]} {u[i]}")
' | head -60
done
ncu --import $OUT/sinter_d64.ncu-rep --page source --print-source sass --csv > $OUT/sinter_d64_sass.csv 2>/dev/null; wc -l $OUT/sinter_d64_sass.csv
ncu --import $OUT/torch_d64.ncu-rep --page source --print-source sass --csv > $OUT/torch_d64_sass.csv 2>/dev/null; wc -l $OUT/torch_d64_sass.csv
echo "== done ($SECONDS s)"
