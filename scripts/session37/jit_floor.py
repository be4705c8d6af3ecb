"""Session 37: what a kernel costs to compile through NVRTC against through the driver's PTX JIT.

For each CUDA source given (sinter's rendered kernels): in fresh processes, NVRTC to a cubin
(sinter's options, NVRTC's cache off), NVRTC to PTX only, the driver's JIT of that PTX
(`cuModuleLoadData`, JIT cache off), and the `ptxas` binary on it. Each child prints the first
call's time and the rest, so the first-in-process cost shows apart.
Usage: python3 jit_floor.py A.cu [B.cu ...]   (env: NVRTC=libnvrtc path, PTXAS=ptxas path)
"""
import ctypes, os, subprocess, sys, time

NVRTC = os.environ.get("NVRTC", "/usr/local/cuda/lib64/libnvrtc.so")
PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
OPTS = ["-std=c++17", "-default-device", "-minimal", "--no-cache"]


def nvrtc(src, arch, reps, want_ptx):
    t0 = time.perf_counter()
    lib = ctypes.CDLL(NVRTC)
    dl = time.perf_counter() - t0
    out = []
    code = None
    for _ in range(reps):
        prog = ctypes.c_void_p()
        assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
        opts = [f"--gpu-architecture={arch}"] + OPTS
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        t = time.perf_counter()
        r = lib.nvrtcCompileProgram(prog, len(opts), arr)
        out.append(time.perf_counter() - t)
        assert r == 0, r
        if want_ptx:
            n = ctypes.c_size_t(); lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
            b = ctypes.create_string_buffer(n.value); lib.nvrtcGetPTX(prog, b); code = b.value
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return dl, out, code


def jit(ptx, reps):
    cu = ctypes.CDLL("libcuda.so.1")
    t0 = time.perf_counter()
    assert cu.cuInit(0) == 0
    dev = ctypes.c_int(); cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p(); assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    cu.cuCtxSetCurrent(ctx)
    init = time.perf_counter() - t0
    out = []
    for _ in range(reps):
        m = ctypes.c_void_p()
        t = time.perf_counter()
        r = cu.cuModuleLoadData(ctypes.byref(m), ctypes.c_char_p(ptx))
        out.append(time.perf_counter() - t)
        assert r == 0, r
        cu.cuModuleUnload(m)
    return init, out


def child(mode, path):
    src = open(path).read()
    if mode == "cubin":
        dl, out, _ = nvrtc(src, "sm_90a", 3, False)
        print(f"dlopen {dl*1e3:.1f} ms; " + " ".join(f"{x*1e3:.1f}" for x in out))
    elif mode == "ptx":
        dl, out, code = nvrtc(src, "compute_90a", 3, True)
        open(path + ".ptx", "wb").write(code)
        print(f"dlopen {dl*1e3:.1f} ms; " + " ".join(f"{x*1e3:.1f}" for x in out) + f"; {len(code)} B of PTX")
    elif mode == "jit":
        init, out = jit(open(path + ".ptx", "rb").read(), 3)
        print(f"context {init*1e3:.1f} ms; " + " ".join(f"{x*1e3:.1f}" for x in out))


def main():
    if sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3])
    env = dict(os.environ, CUDA_CACHE_DISABLE="1")
    for path in sys.argv[1:]:
        print(f"== {os.path.basename(path)} ({os.path.getsize(path)} B)")
        for rnd in range(2):
            for mode in ["cubin", "ptx", "jit"]:
                r = subprocess.run([sys.executable, __file__, "--child", mode, path], env=env, capture_output=True, text=True)
                print(f"  {mode:5} round {rnd}: {r.stdout.strip()} {r.stderr.strip()[-300:]}")
            ts = []
            for _ in range(3):
                t = time.perf_counter()
                subprocess.run([PTXAS, "-arch=sm_90a", path + ".ptx", "-o", "/tmp/jf.cubin"], check=True)
                ts.append(time.perf_counter() - t)
            print(f"  ptxas round {rnd}: " + " ".join(f"{x*1e3:.1f}" for x in ts) + " ms (a process each)")


if __name__ == "__main__":
    main()
