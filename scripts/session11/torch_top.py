"""Top CUDA kernels of torch.compile (default mode) on a torchvision model, batch 8, by total
device time over 10 runs: where torch spends a model's time, beside `sinter profile`'s kernels.

    python3 torch_top.py convnext_tiny [--bf16] [N]
"""
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

name = sys.argv[1]
bf16 = "--bf16" in sys.argv
n = int(([a for a in sys.argv[2:] if a.isdigit()] or ["14"])[0])
torch.backends.cudnn.allow_tf32 = True
m = getattr(torchvision.models, name)(weights=None).eval().cuda()
x = torch.randn(8, 3, 224, 224, device="cuda")
f = torch.compile(m)
ctx = torch.autocast("cuda", torch.bfloat16) if bf16 else torch.autocast("cuda", enabled=False)
with torch.no_grad(), ctx:
    for _ in range(5):
        f(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(10):
            f(x)
        torch.cuda.synchronize()
rows = [e for e in p.key_averages() if e.device_time_total > 0]
tot = sum(e.device_time_total for e in rows) / 10
print(f"torch.compile {name} {'bf16' if bf16 else 'f32'}: {tot / 1e3:.3f} ms of kernels per run")
for e in sorted(rows, key=lambda e: -e.device_time_total)[:n]:
    t = e.device_time_total / 10
    print(f"{t:9.1f} us {100 * t / tot:5.1f}% x{e.count // 10:<3d} {e.key[:110]}")
