#!/usr/bin/env python3
"""(Unused in session 35: the device has no nsys.) `nsys_last.py REPORT N`: from an nsys report, the kernel that ran longest in all, and the
median / min of its last N durations (CUPTI's timestamps, no events) with the median idle
between the end of the GPU work before each of those launches and its start."""
import csv, io, subprocess, sys

rep, n = sys.argv[1], int(sys.argv[2])
out = subprocess.run(["nsys", "stats", "-q", "--report", "cuda_gpu_trace", "--format", "csv", "--output", "-", rep],
                     capture_output=True, text=True).stdout
rows = [r for r in csv.DictReader(io.StringIO(out[out.index("Start"):])) if r.get("Duration (ns)")]
total = {}
for r in rows:
    total[r["Name"]] = total.get(r["Name"], 0) + int(r["Duration (ns)"])
name = max(total, key=total.get)
idx = [i for i, r in enumerate(rows) if r["Name"] == name][-n:]
dur = sorted(int(rows[i]["Duration (ns)"]) / 1e3 for i in idx)
gaps = sorted((int(rows[i]["Start (ns)"]) - int(rows[i - 1]["Start (ns)"]) - int(rows[i - 1]["Duration (ns)"])) / 1e3
              for i in idx if i > 0)
print(f"{name[:60]}: median {dur[len(dur) // 2]:.2f} us, min {dur[0]:.2f}, max {dur[-1]:.2f} ({len(dur)} launches); "
      f"idle before: median {gaps[len(gaps) // 2]:.2f} us; before it: {rows[idx[-1] - 1]['Name'][:30]}")
