#!/usr/bin/env bash
# Session 34, device call 3: where the d64 kernel loses to cuDNN's when L2 starts cold. (a) Each
# timed both ways in one call, twice: flushed (`bench`, the anchor's SDPA through do_bench) and
# back to back (the device test, torch_sdpa.py). (b) ncu, one launch each, L2 flushed by ncu and
# not: duration, DRAM bytes read and written, L2 hit rate and sectors.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "== (a) flushed and back to back ($SECONDS s)"
for r in 1 2; do
  (cd .bench && timeout 120 python3 torch_anchor.py --only sdpa_flash_b8h16s1024d64_bf16 --modes eager --out /tmp/anchor$r.json 2>&1 | grep -E "^sdpa")
  SINTER_CACHE_DIR=/tmp/sc_def timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | cut -c1-100
  SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c1-110
  (cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -1)
done
echo "== (b) ncu ($SECONDS s)"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for cc in all none; do
  SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3" timeout 150 ncu --cache-control $cc --clock-control none -k regex:^k0 --launch-skip 5 --launch-count 1 --metrics $M --csv $t --ignored --nocapture --test-threads=1 attention_timing 2>/dev/null | grep -E '^"' | awk -F'","' -v c=$cc '{print "sinter", c, $(NF-2), $(NF-1), $NF}' | grep -vE "Metric Name" | head -12
  timeout 120 ncu --cache-control $cc --clock-control none -k regex:"sdpa|flash|fmha|attn|fprop" --launch-skip 20 --launch-count 1 --metrics $M --csv python3 scripts/session33/sdpa_d64.py 2>/dev/null | grep -E '^"' | awk -F'","' -v c=$cc '{print "cudnn", c, $(NF-2), $(NF-1), $NF}' | grep -vE "Metric Name" | head -12
done
echo "== done ($SECONDS s)"
