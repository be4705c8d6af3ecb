#!/usr/bin/env python3
"""Top CUDA kernels of torch.compile (default mode) on a `zoo_check.py` model, by total device
time over 10 runs, beside `sinter profile`'s kernels.

    python3 torch_top_zoo.py gpt2 [N]      # zoo_check's build at batch 8, --base sizes
"""
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "onnx" / "models"))
import zoo_check  # noqa: E402

name = sys.argv[1]
n = int(([a for a in sys.argv[2:] if a.isdigit()] or ["14"])[0])
model, example, _, _ = zoo_check.build(name, False, 1, 8, True)
m = model.cuda()
xs = tuple(x.cuda() for x in example)
f = torch.compile(m)
with torch.no_grad():
    for _ in range(5):
        f(*xs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(10):
            f(*xs)
        torch.cuda.synchronize()
rows = [e for e in p.key_averages() if e.device_time_total > 0]
tot = sum(e.device_time_total for e in rows) / 10
print(f"torch.compile {name} f32: {tot / 1e3:.3f} ms of kernels per run")
rows.sort(key=lambda e: -e.device_time_total)
for e in rows[:n]:
    print(f"{e.device_time_total / 10 / 1e3:8.3f} ms {e.count // 10:4d}x  {e.key[:110]}")
