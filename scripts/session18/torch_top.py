"""Top CUDA kernels of torch.compile (default mode) on a torchvision model at a given batch, by
device time over 10 runs (TF32 convolutions, PyTorch's default), beside `sinter profile`'s kernels.

    python3 torch_top.py resnet18 32 [N]
"""
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

name, batch = sys.argv[1], int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 16
m = getattr(torchvision.models, name)(weights=None).eval().cuda()
x = torch.randn(batch, 3, 224, 224, device="cuda")
f = torch.compile(m)
with torch.no_grad():
    for _ in range(5):
        f(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(10):
            f(x)
        torch.cuda.synchronize()
rows = [e for e in p.key_averages() if e.device_time_total > 0]
tot = sum(e.device_time_total for e in rows) / 10
print(f"torch.compile {name} b{batch}: {tot / 1e3:.3f} ms of kernels per run, {sum(e.count for e in rows) // 10} launches")
for e in sorted(rows, key=lambda e: -e.device_time_total)[:n]:
    t = e.device_time_total / 10
    print(f"{t:9.1f} us {100 * t / tot:5.1f}% x{e.count // 10:<3d} {e.key[:120]}")
