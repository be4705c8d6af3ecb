#!/usr/bin/env python3
"""torch's scaled_dot_product_attention at the attention benchmark shapes (bf16), timed as the
device tests time sinter's kernels: median of 5 batches of 20 calls between two CUDA events."""
import torch
import torch.nn.functional as F
from torch_timing import back_to_back_ms

SHAPES = [  # (batch, heads, queries, keys, head dim, causal)
    (8, 16, 1024, 1024, 64, False),
    (8, 16, 2048, 2048, 128, True),
    (8, 16, 2048, 2048, 128, False),
    (32, 32, 1, 4096, 128, False),
    (1, 32, 1, 4096, 128, False),
]

for (b, h, s, kv, d, causal) in SHAPES:
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, h, kv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, h, kv, d, device="cuda", dtype=torch.bfloat16)
    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    ms = back_to_back_ms(f)
    fl = 4 * b * h * s * kv * d * (0.5 if causal else 1)
    print(f"torch sdpa b{b} h{h} s{s} kv{kv} d{d} causal={causal}: {ms:.4f} ms {fl / ms / 1e9:.1f} TFLOP/s")
