#!/usr/bin/env bash
# Session 34, device call 8: the inputs' distribution and the SM clock. The device test's inputs
# were uniform in [-1, 1) where `bench` and the anchor draw normal ones. sinter's default with
# uniform / normal inputs (after a 100 MiB fill, and back to back), torch's SDPA, `bench`; the SM
# clock and board power sampled every 100 ms through each phase.
source scripts/device_env.sh
t=.cudatest/device_attention
export SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 > $OUT/smi.txt &
SMI=$!
phase() { echo "$(date +%s.%N) $1" >> $OUT/phases.txt; }
for r in 1 2; do
  for fill in uniform normal; do
    e=""; [ $fill = normal ] && e="SINTER_TEST_FILL=normal"
    phase "$r $fill gap"; env $e SINTER_TEST_GAP_BYTES=104857600 timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c30-100 | sed "s/^/$r $fill gap100M: /"
    phase "$r $fill b2b"; env $e timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c30-100 | sed "s/^/$r $fill b2b: /"
  done
  phase "$r sdpa"; timeout 60 python3 scripts/session34/sdpa_gap.py 0 104857600 | sed "s/^/$r /"
  phase "$r bench"; SINTER_CACHE_DIR=/tmp/sc_def timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | cut -c1-100 | sed "s/^/$r /"
done
phase "end"; sleep 0.3; kill $SMI
python3 - "$OUT" <<'PY'
import sys, datetime
out = sys.argv[1]
ph = [l.split(None, 1) for l in open(f"{out}/phases.txt")]
ph = [(float(a), b.strip()) for a, b in ph]
smi = []
for l in open(f"{out}/smi.txt"):
    try:
        ts, clk, pw = [x.strip() for x in l.split(",")]
        t = datetime.datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp()
        smi.append((t, float(clk), float(pw)))
    except ValueError:
        pass
for (t0, name), (t1, _) in zip(ph, ph[1:]):
    xs = [(c, p) for t, c, p in smi if t0 <= t < t1]
    busy = [x for x in xs if x[1] > 200]
    if busy:
        cs = sorted(c for c, _ in busy); ps = sorted(p for _, p in busy)
        print(f"{name:18s} samples {len(busy):3d} (of {len(xs)}) sm clock median {cs[len(cs)//2]:.0f} min {cs[0]:.0f} MHz, power median {ps[len(ps)//2]:.0f} max {ps[-1]:.0f} W")
    else:
        print(f"{name:18s} no busy samples (of {len(xs)})")
PY
echo "== done ($SECONDS s)"
