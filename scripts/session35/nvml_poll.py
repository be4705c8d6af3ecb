#!/usr/bin/env python3
"""`nvml_poll.py SECONDS TAG`: polls GPU 0's SM clock, power and clock-event reasons through
NVML (ctypes, libnvidia-ml) as fast as Python can for SECONDS, then prints, for the samples
the driver does not call idle (reason 0x1 clear), the SM clock's distribution, the power's
median and maximum (NVML's reading, itself an average) and the share of samples with each reason."""
import ctypes, sys, time

nv = ctypes.CDLL("libnvidia-ml.so.1")
assert nv.nvmlInit_v2() == 0
h = ctypes.c_void_p()
assert nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
clk, mw, why = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
NAMES = {0x1: "idle", 0x2: "app clocks", 0x4: "SW power cap", 0x8: "HW slowdown", 0x10: "sync boost",
         0x20: "SW thermal", 0x40: "HW thermal", 0x80: "HW power brake", 0x100: "display clocks"}
end = time.time() + float(sys.argv[1])
samples = []
while time.time() < end:
    nv.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(clk))  # NVML_CLOCK_SM
    nv.nvmlDeviceGetPowerUsage(h, ctypes.byref(mw))
    reasons(h, ctypes.byref(why))
    samples.append((clk.value, mw.value / 1000, why.value))
busy = [s for s in samples if not s[2] & 0x1]
tag = sys.argv[2]
if not busy:
    print(f"{tag}: {len(samples)} samples, all idle")
    sys.exit()
clocks = {}
for c, _, _ in busy:
    clocks[c] = clocks.get(c, 0) + 1
counts = {n: sum(1 for s in busy if s[2] & b) for b, n in NAMES.items()}
pw = sorted(s[1] for s in busy)
print(f"{tag}: {len(busy)}/{len(samples)} samples not idle; power median {pw[len(pw) // 2]:.0f} W max {pw[-1]:.0f}; "
      f"SM MHz {', '.join(f'{c}: {100 * n / len(busy):.0f}%' for c, n in sorted(clocks.items(), reverse=True)[:5])}; "
      f"reasons {', '.join(f'{k} {100 * v / len(busy):.0f}%' for k, v in counts.items() if v)}")
