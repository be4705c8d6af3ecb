#!/usr/bin/env python3
"""The SASS instructions of an ncu source-page CSV (`--page source --print-source sass --csv`)
with the most warp-stall samples, and the samples summed by opcode: where a kernel's warps wait.
Usage: sass_top.py FILE.csv [N]"""
import csv, sys, collections

rows = list(csv.reader(open(sys.argv[1])))
if rows and rows[0] and rows[0][0] == "Kernel Name":
    rows = rows[1:]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 15
hdr = rows[0]
def col(name):
    for i, h in enumerate(hdr):
        if h.strip() == name:
            return i
    return None
src, addr = col("Source"), col("Address")
samp = col("Warp Stall Sampling (All Samples)") or col("Warp Stall Sampling (All Cycles)")
if samp is None:
    print("columns:", hdr[:30]); sys.exit(0)
data = []
for r in rows[1:]:
    try:
        data.append((int(r[samp].replace(",", "") or 0), r[addr] if addr is not None else "", r[src]))
    except (ValueError, IndexError):
        pass
total = sum(d[0] for d in data) or 1
print(f"samples {total}")
for s, a, t in sorted(data, reverse=True)[:n]:
    print(f"{s:7d} {100 * s / total:5.1f}% {a} {t[:90]}")
ops = collections.Counter()
for s, a, t in data:
    ops[t.split()[0] if t.split() else "?"] += s
print("by opcode:", ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in ops.most_common(12)))
