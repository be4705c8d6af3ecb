#!/usr/bin/env python3
"""The copy ceiling at the memory-bound workloads' own sizes, timed as torch_anchor.py times them
(triton's do_bench: a 256 MB cache clear before every run, so each run starts behind a dirty L2)
and back to back (events around 20 calls, no clear). Prints GB/s and the share of the 1 GiB copy
ceiling that torch_anchor.py and `sinter bench` use as "% of copy"."""
import torch
from torch_timing import back_to_back_ms
from triton.testing import do_bench

dev = "cuda"


x = torch.empty(1 << 28, device=dev)
y = torch.empty_like(x)
ms = do_bench(lambda: y.copy_(x), return_mode="median")
ceil = 2 * x.numel() * 4 / (ms / 1e3) / 1e9
print(f"ceiling copy 1GiB (do_bench): {ceil:.0f} GB/s")
del x, y
cases = []
N = 10_000_000
a, b, c = (torch.empty(N, device=dev) for _ in range(3))
cases.append(("add 10M f32 (2 reads, 1 write: add_relu_mul's bytes)", lambda: torch.add(a, b, out=c), 3 * N * 4))
M = 1 << 24
s, d = torch.empty(M, device=dev), torch.empty(M, device=dev)
cases.append(("copy 16M f32 (cos's bytes)", lambda: d.copy_(s), 2 * M * 4))
R = 8192 * 4096
s2, d2 = torch.empty(R, device=dev), torch.empty(R, device=dev)
cases.append(("copy 8192x4096 f32 (layernorm_gelu's bytes)", lambda: d2.copy_(s2), 2 * R * 4))
S = 1 << 26
s3, d3 = torch.empty(S, device=dev), torch.empty(S, device=dev)
cases.append(("copy 8192x8192 f32 (softmax's bytes)", lambda: d3.copy_(s3), 2 * S * 4))
for name, fn, nbytes in cases:
    fl = do_bench(fn, return_mode="median")
    bb = back_to_back_ms(fn)
    g1, g2 = nbytes / (fl / 1e3) / 1e9, nbytes / (bb / 1e3) / 1e9
    print(f"{name}: do_bench {fl * 1e3:.1f} us {g1:.0f} GB/s {100 * g1 / ceil:.0f}% | back to back {bb * 1e3:.1f} us {g2:.0f} GB/s {100 * g2 / ceil:.0f}%")
