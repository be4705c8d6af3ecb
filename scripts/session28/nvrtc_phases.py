"""Sums the phases of NVRTC `--fdevice-time-trace` files (session 28): name | detail, ms."""
import json, sys

for fn in sys.argv[1:]:
    d = json.load(open(fn))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    tot = {}
    for e in ev:
        if e.get("ph") == "X":
            k = e["name"] + " | " + str(e.get("args", {}).get("detail", ""))[:50]
            tot[k] = tot.get(k, 0) + e["dur"]
    print(f"-- {fn}")
    for k, v in sorted(tot.items(), key=lambda x: -x[1])[:12]:
        print(f"{v / 1000:9.1f} ms {k}")
