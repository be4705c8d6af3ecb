"""Session 31 probe: is NVRTC-to-PTX plus the driver's JIT (cuModuleLoadData of PTX) cheaper than
NVRTC-to-cubin plus loading the cubin? ctypes only (libnvrtc, libcuda); every source of argv,
reps each, alternating. Run with CUDA_CACHE_DISABLE=1 so the driver's JIT cache cannot answer."""
import ctypes, sys, time, glob, os

nv = ctypes.CDLL(os.environ.get("NVRTC_LIB", "libnvrtc.so.13"))
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0:
        raise SystemExit(f"{what} failed: {r}")
ck(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain"); ck(cu.cuCtxSetCurrent(ctx), "set")

def nvrtc(src, arch, extra):
    prog = ctypes.c_void_p()
    ck(nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None), "create")
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-default-device", b"--no-cache"] + [e.encode() for e in extra]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = nv.nvrtcCompileProgram(prog, len(opts), arr)
    if r != 0:
        n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(prog, log)
        raise SystemExit(log.value.decode()[:2000])
    n = ctypes.c_size_t()
    if arch.startswith("compute"):
        ck(nv.nvrtcGetPTXSize(prog, ctypes.byref(n)), "ptxsize"); buf = ctypes.create_string_buffer(n.value); ck(nv.nvrtcGetPTX(prog, buf), "ptx")
    else:
        ck(nv.nvrtcGetCUBINSize(prog, ctypes.byref(n)), "cubinsize"); buf = ctypes.create_string_buffer(n.value); ck(nv.nvrtcGetCUBIN(prog, buf), "cubin")
    return buf

def load(buf):
    mod = ctypes.c_void_p()
    ck(cu.cuModuleLoadData(ctypes.byref(mod), buf), "load")
    cu.cuModuleUnload(mod)

reps = int(os.environ.get("REPS", "3"))
extra = os.environ.get("X", "").split()
for f in sys.argv[1:]:
    src = open(f, "rb").read()
    for way, arch in [("cubin", "sm_90a"), ("ptx+jit", "compute_90a")] * reps:
        t0 = time.perf_counter(); buf = nvrtc(src, arch, extra); t1 = time.perf_counter(); load(buf); t2 = time.perf_counter()
        print(f"{os.path.basename(f)} {way}: nvrtc {t1-t0:.4f} s, load {t2-t1:.4f} s, total {t2-t0:.4f}")
