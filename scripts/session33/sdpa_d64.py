"""torch's SDPA at attention_b8h16s1024d64_bf16, 30 calls: the kernel for ncu to profile beside
sinter's (session 33, call 1)."""
import torch
import torch.nn.functional as F

q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(30):
    F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
