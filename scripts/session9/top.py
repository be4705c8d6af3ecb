"""Prints a profile folder's compile phases and its slowest kernels (sinter profile --out DIR)."""
import json
import sys

p = json.load(open(sys.argv[1] + "/profile.json"))
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
spans = sorted(p.get("compile_spans", []), key=lambda s: -s["dur_ns"])
print("compile phases:", ", ".join(f"{s['name']} {s['dur_ns'] / 1e9:.3f}s" for s in spans[:10]))
ks = [k for k in p["kernels"] if k.get("stats")]
tot = sum(k["stats"]["median_ns"] for k in ks)
print(f"{len(ks)} kernels, sum of medians {tot / 1e6:.3f} ms")
by = {}
for k in ks:
    key = " ".join(k["ops"][:4])
    e = by.setdefault(key, [0, 0.0, 0.0, 0.0])
    e[0] += 1
    e[1] += k["stats"]["median_ns"]
    e[2] += k["flops"]
    e[3] += k["bytes"]
for key, (c, t, f, b) in sorted(by.items(), key=lambda x: -x[1][1])[:n]:
    print(f"{t / 1e3:9.1f} us {100 * t / tot:5.1f}% x{c:<3d} {f / t / 1e3 if t else 0:7.1f} TFLOP/s {b / t if t else 0:7.1f} GB/s  {key}")
