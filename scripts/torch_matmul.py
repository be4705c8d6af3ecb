#!/usr/bin/env python3
"""torch's bf16 matrix product (cuBLAS) at n^3 for each n given (default 8192), timed as the
device tests time sinter's kernels: median of 20 calls, each between two CUDA events, after five
warm-ups."""
import sys

import torch

for n in [int(x) for x in sys.argv[1:]] or [8192]:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    m = ts[10]
    print(f"torch (cuBLAS) {n}^3 bf16 {m:.3f} ms {2 * n**3 / m / 1e9:.0f} TFLOP/s")
