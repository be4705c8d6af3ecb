#!/usr/bin/env bash
# Session 21, device call 5: GQA decode with a K/V head's query heads packed into one block of the
# decode template. (a) checks: the shared suite, every attention tuning against the interpreter
# (its GQA decode cases now packed); (b) every decode candidate (`attention_timing`) beside torch's
# SDPA with enable_gqa at the GQA shape, timed the same way (5 x 20 launches, no L2 clear).
source scripts/device_env.sh
echo "== (a) checks ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads=4 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "test result|FAILED|panicked" /tmp/suite.log | head -8
timeout 220 .cudatest/device_attention attention_matches --test-threads=1 > /tmp/da.log 2>&1; echo "device_attention rc $?"; grep -E "test result|FAILED|panicked" /tmp/da.log | head -5
echo "== (b) timing ($SECONDS s)"
timeout 150 .cudatest/device_attention attention_timing --ignored --nocapture --test-threads=1 2>&1 | grep -E "^decode (gqa|b32 h32 m1 kv4096 d128)" | sort -u | cut -c1-150
cat > /tmp/gqa.py <<'PY'
import sys; sys.path.insert(0, "scripts")
import torch, torch.nn.functional as F
from torch_timing import back_to_back_ms
q = torch.randn(32, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(32, 8, 4096, 128, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
print(f"torch sdpa gqa b32 h32/8 m1 kv4096 d128: {back_to_back_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)):.4f} ms")
ke, ve = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)
print(f"torch sdpa, K and V expanded to 32 heads: {back_to_back_ms(lambda: F.scaled_dot_product_attention(q, ke, ve)):.4f} ms")
PY
timeout 100 python3 /tmp/gqa.py 2>&1 | grep torch
echo "== done ($SECONDS s)"
