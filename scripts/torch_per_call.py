#!/usr/bin/env python3
"""Per-call time of the overhead-bound workloads in torch, as a user calling in a loop sees it:
wall time of 2000 back-to-back calls (inputs warm in L2, one synchronize at the end) for eager,
torch.compile default and reduce-overhead. `sinter bench` reports the same quantity as `call_us`."""
import time

import torch
import torch.nn.functional as F

dev = "cuda"


def chain(x):
    for i in range(64):
        x = torch.sin(x) * 1.0001 + 0.001 if i % 2 else torch.relu(x) - 0.5
    return x


cases = [
    ("matmul_softmax_100_f32", lambda x, y: F.softmax(x @ y, dim=1), lambda: (torch.randn(100, 100, device=dev), torch.randn(100, 100, device=dev))),
    ("pointwise_chain64_1024_f32", chain, lambda: (torch.randn(1024, device=dev),)),
]
N = 2000
with torch.no_grad():
    for name, fn, make in cases:
        args = make()
        for mode in ["eager", "default", "reduce-overhead"]:
            torch._dynamo.reset()
            f = fn if mode == "eager" else torch.compile(fn, mode=None if mode == "default" else mode)
            for _ in range(20):
                f(*args)
            torch.cuda.synchronize()
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                for _ in range(N):
                    f(*args)
                torch.cuda.synchronize()
                best = min(best, (time.perf_counter() - t) / N * 1e6)
            print(f"{name:30s} {mode:16s} per call {best:7.2f} us (best of 3 x {N})")
