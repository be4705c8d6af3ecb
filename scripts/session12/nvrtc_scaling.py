#!/usr/bin/env python3
"""How NVRTC scales over threads on this machine: ``nvrtc_scaling.py LIBNVRTC [INCLUDE]``.

Compiles 32 small distinct kernels (sm_90a, sinter's options) with 1, 2, 4, 8 and 16 threads
(ctypes releases the GIL during the call), then as 4 translation units of 8; prints wall time and
the mean time of one program.
"""
import ctypes
import os
import sys
import threading
import time

lib = ctypes.CDLL(sys.argv[1])
inc = sys.argv[2] if len(sys.argv) > 2 else "/usr/local/cuda/include"
OPTS = [b"--gpu-architecture=sm_90a", b"-std=c++17", b"--ptxas-options=-v", b"-default-device",
        ("--include-path=" + inc).encode()]


def src(i: int) -> bytes:
    return (f'extern "C" __global__ void k{i}(const float* __restrict__ a, float* __restrict__ b, unsigned n) {{\n'
            f"  unsigned j = blockIdx.x * blockDim.x + threadIdx.x; if (j < n) b[j] = fmaxf(a[j] * {i}.5f, 0.f);\n}}\n").encode()


def comp(s: bytes) -> float:
    p = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(p), s, b"k.cu", 0, None, None) == 0
    arr = (ctypes.c_char_p * len(OPTS))(*OPTS)
    t = time.perf_counter()
    r = lib.nvrtcCompileProgram(p, len(OPTS), arr)
    dt = time.perf_counter() - t
    lib.nvrtcDestroyProgram(ctypes.byref(p))
    assert r == 0, r
    return dt


def batch(threads: int, progs: list[bytes]) -> None:
    nxt, lock, times = [0], threading.Lock(), []

    def work():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(progs):
                return
            times.append(comp(progs[i]))

    t = time.perf_counter()
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    print(f"{threads:2d} threads, {len(progs)} programs: wall {(time.perf_counter() - t) * 1e3:6.0f} ms, "
          f"one program {sum(times) / len(times) * 1e3:5.0f} ms")


print(f"cpus: os {os.cpu_count()}, affinity {len(os.sched_getaffinity(0))}")
comp(src(999))
singles = [src(i) for i in range(32)]
for n in (1, 2, 4, 8, 16):
    batch(n, singles)
groups = [b"".join(src(100 + 8 * g + i) for i in range(8)) for g in range(4)]
batch(4, groups)
