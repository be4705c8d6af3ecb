#!/usr/bin/env bash
# Session 13, device call 1 (issue 12): attention at head dim 64 with Q in registers (`qr`) and
# exponentials on the FMA pipe (`eN`): the new tunings against the interpreter, every wgmma tile
# timed at the benchmark shapes, torch's SDPA in the same call, and ncu's pipe and shared-memory
# figures for the default d64 tile and its two variants.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
t=.cudatest/device_attention
echo "== correctness of the new tunings (every case, poisoned outputs)"
SINTER_TEST_TUNINGS=" e2, e4, qr" timeout 200 $t --test-threads=1 --nocapture attention_matches >$OUT/check.log 2>&1; echo "rc $?"
grep -cE " ok$" $OUT/check.log; grep -E "FAILED|panicked|^test result" $OUT/check.log | head -20
echo "== torch SDPA"
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/torch_sdpa.py 2>&1 | tail -5
echo "== timing: every wgmma tile (median of 5 x 20 launches)"
SINTER_TEST_TUNINGS="wgmma" timeout 300 $t --ignored --nocapture --test-threads=1 attention_timing >$OUT/timing.log 2>&1; echo "rc $?"
grep TFLOP $OUT/timing.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^decode\|^vit"
echo "== ncu"
ncu --query-metrics --chip gh100 > $OUT/metrics.txt 2>&1
want=""
for m in sm__pipe_tensor_op_gmma_cycles_active sm__pipe_tensor_cycles_active sm__inst_executed_pipe_xu sm__pipe_xu_cycles_active \
  sm__pipe_fma_cycles_active sm__pipe_alu_cycles_active sm__pipe_fmaheavy_cycles_active smsp__issue_active sm__warps_active \
  l1tex__data_pipe_lsu_wavefronts_mem_shared l1tex__data_bank_reads l1tex__data_bank_writes sm__throughput; do
  grep -q "^$m " $OUT/metrics.txt && want="$want,$m.avg.pct_of_peak_sustained_active"
done
want=${want#,}; echo "metrics: $want"
for f in "wgmma 64x128 wg1 s2" " s2 qr" "s2 e4" "s2 e4 qr" "wgmma-tma 128x128 wg2+1 s3"; do
  echo "-- $f"
  SINTER_TEST_TUNINGS="$f" timeout 90 ncu --kernel-name regex:attention --launch-count 1 --metrics "$want" \
    --section WarpStateStats $t --ignored --test-threads=1 attention_timing > "$OUT/ncu-${f// /_}.txt" 2>&1 || echo "ncu rc $?"
  grep -E "pct|Stall|Warp Cycles|attention" "$OUT/ncu-${f// /_}.txt" | grep -v "^test\|running" | head -24
done
