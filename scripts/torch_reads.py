#!/usr/bin/env python3
"""Read-bound kernels as torch runs them, for sinter's sum_64M_f32 and the decode attention:
torch.sum over 64M f32 (268 MB read) timed as torch_anchor.py times (do_bench, a 256 MB clear
before each run) and back to back, with torch.compile's sum beside it; then the kernels (names,
grids, durations) that torch's SDPA and torch.compile's written-out decode launch, from
torch.profiler."""
import math
import torch
import torch.nn.functional as F
from torch_timing import back_to_back_ms
from triton.testing import do_bench

x = torch.randn(1 << 26, device="cuda")
nbytes = x.numel() * 4
for name, fn in [("torch.sum", lambda: x.sum()), ("torch.compile sum", torch.compile(lambda: x.sum()))]:
    fn()
    fl = do_bench(fn, return_mode="median")
    bb = back_to_back_ms(fn)
    print(f"{name} 64M f32: do_bench {fl * 1e3:.1f} us {nbytes / fl / 1e6:.0f} GB/s | back to back {bb * 1e3:.1f} us {nbytes / bb / 1e6:.0f} GB/s")
del x

B, H, KV, D = 32, 32, 4096, 128
q = torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16)
k = torch.randn(B, H, KV, D, device="cuda", dtype=torch.bfloat16)
v = torch.randn(B, H, KV, D, device="cuda", dtype=torch.bfloat16)
written = torch.compile(lambda q, k, v: torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D)), dim=-1) @ v)
for name, fn in [("sdpa decode", lambda: F.scaled_dot_product_attention(q, k, v)), ("torch.compile decode", lambda: written(q, k, v))]:
    fn()
    torch.cuda.synchronize()
    fl = do_bench(fn, return_mode="median")
    print(f"{name}: do_bench {fl * 1e3:.1f} us, K+V {2 * k.numel() * 2 / fl / 1e6:.0f} GB/s")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    for e in p.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            print(f"  {e.key[:150]}  x{e.count}  {e.device_time_total / max(e.count, 1):.1f} us")
