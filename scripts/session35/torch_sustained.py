#!/usr/bin/env python3
"""`torch_sustained.py SECONDS`: torch's kernels for sinter's attention and matmul workloads, run
back to back for SECONDS each, timed as `sinter bench --sustain` times sinter's: batches of about
10 ms closed by a synchronize, the median ms per call of the batches that ended in the last tenth
(at least three). `--graph`: only SDPA d64, as launched and replayed from a CUDA graph, with the
host's time to issue one call (is the launch loop host-bound?). `--only NAME`: that workload's
kernel alone."""
import sys, time, torch
import torch.nn.functional as F

S = float(sys.argv[1])  # seconds of each soak
bf = dict(device="cuda", dtype=torch.bfloat16)


def sustained(fn):
    def batch(n):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3 / n
    n = max(1, min(10000, int(10.0 / max(batch(1), 1e-6))))
    start, ends = time.perf_counter(), []
    while time.perf_counter() - start < S or len(ends) < 3:
        ms = batch(n)
        ends.append((time.perf_counter() - start, ms))
    cut = 0.9 * ends[-1][0]
    tail = sorted(m for e, m in ends if e >= cut)
    if len(tail) < 3:
        tail = sorted(m for _, m in ends[-3:])
    return tail[len(tail) // 2]


def host_us(fn, n=200):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) * 1e6 / n
    torch.cuda.synchronize()
    return host


if "--graph" in sys.argv:
    q, k, v = (torch.randn(8, 16, 1024, 64, **bf) for _ in range(3))
    call = lambda: F.scaled_dot_product_attention(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    print(f"sdpa d64 launched: host {host_us(call):.1f} us/call, sustained {sustained(call):.4f} ms")
    print(f"sdpa d64 graph replay: host {host_us(g.replay):.1f} us/call, sustained {sustained(g.replay):.4f} ms")
    sys.exit()

only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None


def want(name):
    return only is None or only == name


if want("attention_b8h16s1024d64_bf16"):
    q, k, v = (torch.randn(8, 16, 1024, 64, **bf) for _ in range(3))
    print(f"attention_b8h16s1024d64_bf16 sdpa: {sustained(lambda: F.scaled_dot_product_attention(q, k, v)):.4f} ms")
if want("attention_causal_b8h16s2048d128_bf16"):
    q, k, v = (torch.randn(8, 16, 2048, 128, **bf) for _ in range(3))
    print(f"attention_causal_b8h16s2048d128_bf16 sdpa causal: {sustained(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)):.4f} ms")
if want("attention_decode_b32h32kv4096d128_bf16"):
    q = torch.randn(32, 32, 1, 128, **bf)
    k, v = (torch.randn(32, 32, 4096, 128, **bf) for _ in range(2))
    print(f"attention_decode_b32h32kv4096d128_bf16 sdpa: {sustained(lambda: F.scaled_dot_product_attention(q, k, v)):.4f} ms")
if want("matmul_8192_bf16"):
    a, b = torch.randn(8192, 8192, **bf), torch.randn(8192, 8192, **bf)
    print(f"matmul_8192_bf16 torch.matmul: {sustained(lambda: a @ b):.4f} ms")
