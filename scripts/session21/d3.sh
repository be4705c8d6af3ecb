#!/usr/bin/env bash
# Session 21, device call 3: rows split over blocks of one kernel (sum_64M) and the decode
# attention on the tensor-core tile. (a) checks: the CUDA shared suite (its new split-row case
# and the attention cases), split rows in every mode, every attention tuning against the
# interpreter; (b) timing: the decode shapes (every candidate, `attention_timing`), sum_64M
# and the decode in `bench` beside torch in the same call, sum_64M's kernel under ncu,
# max-autotune's variants with their times.
source scripts/device_env.sh
echo "== (a) checks ($SECONDS s)"
timeout 240 .cudatest/suite --test-threads=4 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "test result|FAILED|panicked" /tmp/suite.log | head -8
timeout 120 .cudatest/device split_rows --test-threads=1 2>&1 | grep -E "test result|FAILED|panicked" | head -5
timeout 200 .cudatest/device_attention attention_matches --test-threads=1 > /tmp/da.log 2>&1; echo "device_attention rc $?"; grep -E "test result|FAILED|panicked" /tmp/da.log | head -5
echo "== (b) timing ($SECONDS s)"
timeout 150 .cudatest/device_attention attention_timing --ignored --nocapture --test-threads=1 2>&1 | grep -E "^decode" | sort -k1,6 > /tmp/at.txt
grep -E "default|wgmma-ov 64x128 wg1 s3|decode block (128|256|512)( |$)" /tmp/at.txt | cut -c1-150
W=sum_64M_f32,attention_decode_b32h32kv4096d128_bf16
timeout 100 $B bench --backend cuda --workload $W --json $OUT/sinter.json 2>&1 | grep -E "^(sum|attention)" 
timeout 100 $B profile --backend cuda --workload sum_64M_f32 --out /tmp/ps > /dev/null 2>&1; python3 scripts/profile_top.py /tmp/ps/profile.json 4 | head -5
(cd scripts && timeout 150 python3 torch_reads.py 2>&1 | grep -E "do_bench")
timeout 100 python3 .bench/torch_anchor.py --only attention_decode_b32h32kv4096d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "^(attention|sdpa)"
timeout 100 $B bench --backend cuda --workload $W --no-calibrate --json $OUT/sinter2.json 2>&1 | grep -E "^(sum|attention)"
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
timeout 90 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 6 --launch-count 2 --metrics $M \
  $B bench --backend cuda --workload sum_64M_f32 --iters 8 --warmup 2 --no-calibrate 2>&1 | grep -E "^  [a-zA-Z_0-9]|  (gpu|dram|launch|sm)__" | cut -c1-110
SINTER_LOG=autotune timeout 150 $B bench --backend cuda --mode max-autotune --workload sum_64M_f32 --no-calibrate 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "Tuning|^sum" | sed -E 's/[a-z_]+: None,? ?//g' | cut -c1-200 | tail -40
echo "== done ($SECONDS s)"
