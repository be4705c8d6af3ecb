#!/usr/bin/env bash
# Session 18, device call 4 (issue 11): where resnet18_b32_f32 loses to torch.compile (0.80x in
# call 3): sinter's kernels (`sinter profile`) beside torch.compile's (torch.profiler), and the
# workload under the layout and library switches and max-autotune.
source scripts/device_env.sh
R=resnet18_b32_f32
echo "== (a) sinter's kernels ($SECONDS s)"
timeout 120 $B profile --backend cuda --workload $R --out /tmp/prof > /tmp/prof.log 2>&1; echo "profile rc $?"; tail -3 /tmp/prof.log
python3 - <<'PY'
import json
p = json.load(open('/tmp/prof/profile.json'))
ks = p.get('kernels', [])
tot = sum((k.get('stats') or {}).get('median_ns', 0) for k in ks)
print(f"sinter {len(ks)} kernels, {tot/1e3:.1f} us of kernels per run")
for k in sorted(ks, key=lambda k: -(k.get('stats') or {}).get('median_ns', 0)):
    st = k.get('stats') or {}
    print(f"{st.get('median_ns',0)/1e3:8.1f} us {k.get('name')[:40]:40s} {str(k.get('strategy'))[:70]} grid {k.get('grid')} block {k.get('block')}")
PY
echo "== (b) torch.compile's kernels ($SECONDS s)"
timeout 150 python3 scripts/torch_top.py resnet18 --batch 32 24 2>&1 | grep -v Warn
echo "== (c) switches ($SECONDS s)"
timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R"
SINTER_CHANNELS_LAST=0 timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed 's/^/NCHW /'
SINTER_CUDNN=0 timeout 60 $B bench --backend cuda --workload $R --no-calibrate 2>&1 | grep -E "^$R" | sed 's/^/no-cudnn /'
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate > /tmp/mat.log 2>&1; grep -E "^$R" /tmp/mat.log
grep -E "chose" /tmp/mat.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-200 | head -30
cp /tmp/prof.log /tmp/mat.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
