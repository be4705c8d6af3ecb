#!/usr/bin/env python3
"""torch's bf16 matrix product (cuBLAS) at 8192^3, timed as the device tests time sinter's
kernels: median of 20 calls, each between two CUDA events, after five warm-ups."""
import torch

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
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
print(f"torch (cuBLAS) 8192^3 bf16 {m:.3f} ms {2 * 8192**3 / m / 1e9:.0f} TFLOP/s")
