#!/usr/bin/env python3
"""torch's SDPA at b8 h16 s1024 d64 bf16, each call timed alone (events around it, median of 100)
after a fill of N bytes (0: none), as the device test's SINTER_TEST_GAP_BYTES times sinter's."""
import sys, torch
import torch.nn.functional as F

q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for n in [int(a) for a in sys.argv[1:]]:
    buf = torch.empty(max(n, 16) // 4, device="cuda", dtype=torch.float32)
    for _ in range(10):
        F.scaled_dot_product_attention(q, k, v)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(100)]
    for s, e in ev:
        if n:
            buf.zero_()
        s.record(); F.scaled_dot_product_attention(q, k, v); e.record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in ev)
    print(f"sdpa gap {n}: {t[50]:.4f} ms (min {t[0]:.4f})")
