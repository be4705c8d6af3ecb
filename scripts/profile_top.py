"""The kernels of a `sinter profile` artifact folder by device time: their count, their sum per
run, then the slowest (all, or the first N) with name and strategy.

    python3 scripts/profile_top.py DIR/profile.json [N]
"""
import json
import sys

p = json.load(open(sys.argv[1]))
n = int(sys.argv[2]) if len(sys.argv) > 2 else None
ks = p.get("kernels", [])
ns = lambda k: (k.get("stats") or {}).get("median_ns", 0)
print(f"{len(ks)} kernels, {sum(map(ns, ks)) / 1e3:.1f} us of kernels per run")
for k in sorted(ks, key=lambda k: -ns(k))[:n]:
    print(f"{ns(k) / 1e3:8.1f} us {k.get('name')[:40]:40s} {str(k.get('strategy'))[:80]}")
