#!/usr/bin/env python3
"""torch's f32 products (cuBLAS, exact f32 as torch.compile's default) at the shapes given, timed
as `gemm_algos` times cuBLASLt's algorithms: median of 30 calls between CUDA events, after three
warm-ups. A shape is MxNxK; `:bt` multiplies by a stored `N x K` weight transposed (`F.linear`).

    python3 torch_gemm.py 1576x768x3072:bt 1576x2304x768 ...
"""
import sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
for s in sys.argv[1:]:
    bt = s.endswith(":bt")
    m, n, k = (int(v) for v in s.removesuffix(":bt").split("x"))
    a = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda") if bt else torch.randn(k, n, device="cuda")
    f = (lambda: torch.nn.functional.linear(a, w)) if bt else (lambda: a @ w)
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(30):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        f()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ms = sorted(ts)[len(ts) // 2]
    print(f"torch {s}: {ms * 1e3:8.1f} us {2 * m * n * k / ms / 1e9:6.1f} TFLOP/s")
