"""Top CUDA kernels of torch.compile (default mode) on a torchvision model, by device time over 10
runs (TF32 convolutions, PyTorch's default; bf16 under autocast with --bf16): where torch spends a
model's time, beside `sinter profile`'s kernels.

    python3 scripts/torch_top.py resnet18 [--batch 32] [--bf16] [N]
"""
import argparse

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("n", nargs="?", type=int, default=14, help="kernels to list")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--bf16", action="store_true")
a = ap.parse_args()
torch.backends.cudnn.allow_tf32 = True
m = getattr(torchvision.models, a.model)(weights=None).eval().cuda()
x = torch.randn(a.batch, 3, 224, 224, device="cuda")
f = torch.compile(m)
ctx = torch.autocast("cuda", torch.bfloat16) if a.bf16 else torch.autocast("cuda", enabled=False)
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
launches = sum(e.count for e in rows) // 10
print(f"torch.compile {a.model} b{a.batch} {'bf16' if a.bf16 else 'f32'}: {tot / 1e3:.3f} ms of kernels per run, {launches} launches")
for e in sorted(rows, key=lambda e: -e.device_time_total)[: a.n]:
    t = e.device_time_total / 10
    print(f"{t:9.1f} us {100 * t / tot:5.1f}% x{e.count // 10:<3d} {e.key[:120]}")
