#!/usr/bin/env python3
"""torch's SDPA with enable_gqa at the GQA decode shape, timed as attention_timing times (5 x 20 launches)."""
import sys; sys.path.insert(0, "scripts")
import torch, torch.nn.functional as F
from torch_timing import back_to_back_ms
q = torch.randn(32, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(32, 8, 4096, 128, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
print(f"torch sdpa gqa b32 h32/8 m1 kv4096 d128: {back_to_back_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)):.4f} ms")
