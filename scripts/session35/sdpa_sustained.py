#!/usr/bin/env python3
"""torch's SDPA at b8 h16 s1024 d64 bf16 after N calls back to back (argv[1]), then timed back to
back as the device test's loop times sinter's (5 batches of 20 between two events, median)."""
import sys, torch
import torch.nn.functional as F

q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
n = int(sys.argv[1])
for _ in range(n):
    F.scaled_dot_product_attention(q, k, v)
t = []
for _ in range(5):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        F.scaled_dot_product_attention(q, k, v)
    e.record()
    torch.cuda.synchronize()
    t.append(s.elapsed_time(e) / 20)
t.sort()
print(f"sdpa after {n} back to back: {t[2]:.4f} ms (min {t[0]:.4f})")
