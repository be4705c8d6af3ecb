#!/usr/bin/env bash
# Session 34, device call 6: where the d64 kernel's extra ~3 us go when L2 starts cold (call 3:
# 86.4 us alone under ncu against 82.2 back to back; cuDNN 83.4 / 82.7). ncu on the default
# tile's 6th launch of the device test: L2 flushed (kernel replay) and as the launch before left
# it (application replay, no cache control); stall samples per SASS instruction, warp states.
source scripts/device_env.sh
t=.cudatest/device_attention
export SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3"
S="--section SourceCounters --section WarpStateStats --section SpeedOfLight --metrics gpu__time_duration.sum,dram__bytes_read.sum"
timeout 200 ncu --cache-control all --clock-control none -k regex:^k0 --launch-skip 5 --launch-count 1 $S -o $OUT/cold $t --ignored --nocapture --test-threads=1 attention_timing > /dev/null 2>&1; echo "cold rc $?"
timeout 300 ncu --replay-mode application --cache-control none --clock-control none -k regex:^k0 --launch-skip 5 --launch-count 1 $S -o $OUT/warm $t --ignored --nocapture --test-threads=1 attention_timing > /dev/null 2>&1; echo "warm rc $?"
for r in cold warm; do
  echo "==== $r"
  ncu --import $OUT/$r.ncu-rep --print-units base 2>&1 | grep -E "Duration|gpu__time|dram__bytes_read|Warp Cycles Per Issued|Stall|Issue Slots|Memory Throughput" | head -20
  ncu --import $OUT/$r.ncu-rep --page raw --csv 2>/dev/null | python3 -c '
import sys, csv
rows = list(csv.reader(sys.stdin)); h, v = rows[0], rows[2]
st = sorted(((float(v[i].replace(",", "") or 0), n) for i, n in enumerate(h) if "warp_issue_stalled" in n and n.endswith("per_warp_active.pct")), reverse=True)[:10]
print("  stalls:", ", ".join(f"{n.split(\"stalled_\")[1].split(\"_per\")[0]} {x:.1f}" for x, n in st))
'
  ncu --import $OUT/$r.ncu-rep --page source --print-source sass --csv > $OUT/$r.csv 2>/dev/null
  python3 scripts/session34/sass_top.py $OUT/$r.csv 18
done
echo "== done ($SECONDS s)"
