#!/usr/bin/env python3
"""Where a one-kernel cold compile's time goes when ptxas runs in the driver instead of NVRTC:
for each source, alternating, (cubin) NVRTC to sm_90a SASS + cuModuleLoadData of the cubin, as
sinter compiles today; (ptx+link) NVRTC to compute_90a PTX + the driver's linker (cuLink*, PTX
in, a cubin out that sinter's disk cache could keep) + load; (ptx+load) NVRTC to PTX +
cuModuleLoadData of the PTX (the driver's JIT). The driver's compute cache is off
(CUDA_CACHE_DISABLE=1, set before libcuda loads). Usage: jit_split.py SRC.cu... [reps]"""
import ctypes, os, sys, time

os.environ["CUDA_CACHE_DISABLE"] = "1"
NV = os.environ.get("NVRTC_LIB", "libnvrtc.so.13")
nvrtc = ctypes.CDLL(NV)
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    cuda = None  # NVRTC only (a machine without a driver)
OPTS = ["-std=c++17", "-default-device", "-minimal"]


def check(r, what):
    if r != 0:
        raise SystemExit(f"{what}: error {r}")


def nvrtc_compile(src, arch):
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None), "create")
    opts = [f"--gpu-architecture={arch}"] + OPTS
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    r = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    if r != 0:
        n = ctypes.c_size_t(); nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        b = ctypes.create_string_buffer(n.value); nvrtc.nvrtcGetProgramLog(prog, b)
        raise SystemExit(b.value.decode()[:2000])
    n = ctypes.c_size_t()
    if arch.startswith("sm_"):
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nvrtc.nvrtcGetCUBIN(prog, b)
    else:
        nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nvrtc.nvrtcGetPTX(prog, b)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return b.raw


def load(image):
    m = ctypes.c_void_p()
    check(cuda.cuModuleLoadDataEx(ctypes.byref(m), ctypes.c_char_p(image), 0, None, None), "load")
    cuda.cuModuleUnload(m)


def link(ptx):
    st = ctypes.c_void_p()
    check(cuda.cuLinkCreate_v2(0, None, None, ctypes.byref(st)), "link create")
    check(cuda.cuLinkAddData_v2(st, 1, ctypes.c_char_p(ptx), len(ptx), b"k.ptx", 0, None, None), "link add")
    out = ctypes.c_void_p(); n = ctypes.c_size_t()
    check(cuda.cuLinkComplete(st, ctypes.byref(out), ctypes.byref(n)), "link complete")
    cubin = ctypes.string_at(out, n.value)
    cuda.cuLinkDestroy(st)
    return cubin


if cuda is None:
    for path in [a for a in sys.argv[1:] if not a.isdigit()]:
        src = open(path).read(); t = time.perf_counter(); nvrtc_compile(src, "sm_90a"); t1 = time.perf_counter(); nvrtc_compile(src, "compute_90a")
        print(path, f"nvrtc cubin {(t1 - t) * 1e3:.1f} ptx {(time.perf_counter() - t1) * 1e3:.1f} ms")
    raise SystemExit(0)
check(cuda.cuInit(0), "init")
dev = ctypes.c_int(); check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "device")
ctx = ctypes.c_void_p(); check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "ctx"); check(cuda.cuCtxSetCurrent(ctx), "set")
args = [a for a in sys.argv[1:] if not a.isdigit()]
reps = int(next((a for a in sys.argv[1:] if a.isdigit()), "5"))
for path in args:
    src = open(path).read()
    res = {"cubin": [], "ptx+link": [], "ptx+load": [], "nvrtc ptx": [], "nvrtc cubin": []}
    for _ in range(reps):
        t0 = time.perf_counter(); cub = nvrtc_compile(src, "sm_90a"); t1 = time.perf_counter(); load(cub); t2 = time.perf_counter()
        res["cubin"].append(t2 - t0); res["nvrtc cubin"].append(t1 - t0)
        t0 = time.perf_counter(); ptx = nvrtc_compile(src, "compute_90a"); t1 = time.perf_counter(); cub2 = link(ptx); load(cub2); t2 = time.perf_counter()
        res["ptx+link"].append(t2 - t0); res["nvrtc ptx"].append(t1 - t0)
        t0 = time.perf_counter(); ptx = nvrtc_compile(src, "compute_90a"); load(ptx + b"\0"); t2 = time.perf_counter()
        res["ptx+load"].append(t2 - t0)
    print(os.path.basename(path), " ".join(f"{k} {min(v)*1e3:.1f}/{sorted(v)[len(v)//2]*1e3:.1f}" for k, v in res.items()), "ms (min/median)")
