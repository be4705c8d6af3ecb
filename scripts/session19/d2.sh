#!/usr/bin/env bash
# Session 19, device call 2 (issue 11): which cuDNN kernels resnet18_b32_f32's convolutions run and
# for how long, inside sinter's run (nsys; ncu where nsys is absent), beside torch.compile's
# (torch.profiler, same call); cuDNN's heuristic modes instant / A / B timed.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
R=resnet18_b32_f32
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
echo "== (a) sinter's kernels in its run ($SECONDS s)"
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R"
if [ -n "$NSYS" ]; then
  timeout 200 $NSYS profile -o /tmp/r18 --force-overwrite true -t cuda $B bench --backend cuda --workload $R --no-calibrate > /tmp/nsys.log 2>&1; echo "nsys rc $?"
  timeout 120 $NSYS stats --report cuda_gpu_kern_sum --format csv /tmp/r18.nsys-rep > /tmp/kern.csv 2>/dev/null
  python3 - <<'PY'
import csv
rows = list(csv.reader(open('/tmp/kern.csv')))
i = next(i for i, r in enumerate(rows) if r and r[0].startswith('Time'))
h = rows[i]; data = rows[i+1:]
ci = {k: j for j, k in enumerate(h)}
for r in data[:40]:
    if len(r) < len(h): continue
    print(f"{float(r[ci['Avg (ns)']])/1e3:8.1f} us avg x{r[ci['Instances']]:>6} {r[ci['Name']][:150]}")
PY
else
  timeout 300 ncu --metrics gpu__time_duration.sum --kernel-name regex:"xmma|cutlass|implicit|sm90|sm80|conv|krsc|epilogue|pool" --launch-skip 300 --launch-count 70 $B bench --backend cuda --workload $R --no-calibrate > /tmp/ncu.log 2>&1; echo "ncu rc $?"
  grep -E "^  [a-zA-Z_]|gpu__time_duration" /tmp/ncu.log | paste - - | awk '{printf "%s ... %s %s\n", substr($1,1,90), $(NF-1), $NF}' | head -80
fi
echo "== (b) the engines' descriptions ($SECONDS s)"
timeout 120 $B profile --backend cuda --workload $R --out /tmp/pd > /dev/null 2>&1; echo "profile rc $?"
grep -h "algorithm" /tmp/pd/kernels/*k1[79]* /tmp/pd/kernels/*k9_* /tmp/pd/kernels/*k4_* 2>/dev/null | cut -c1-400 | head -8
ls /tmp/pd | head
echo "== (c) heuristic modes ($SECONDS s)"
for m in instant a b instant a b; do
  SINTER_CUDNN_HEUR=$m timeout 90 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed "s/^/heur=$m /"
done
echo "== (d) torch.compile's kernels ($SECONDS s)"
timeout 150 python3 scripts/torch_top.py resnet18 --batch 32 30 2>&1 | grep -v Warn
cp /tmp/kern.csv /tmp/nsys.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
