#!/usr/bin/env python3
"""Runs `$SINTER_BIN "$@"` and appends to $TSINTER_LOG what the child saw and cost: its CPU
affinity, the environment variables that steer threads, its wall, user and system seconds and its
context switches (session 13: why a cold compile started from zoo_check.py ran NVRTC 3-8x slower
than one started from a shell)."""
import os, resource, subprocess, sys, time

log = open(os.environ.get("TSINTER_LOG", "/tmp/tsinter.log"), "a")
env = {k: v for k, v in os.environ.items() if k.split("_")[0] in ("OMP", "MKL", "KMP", "GOMP", "CUDA", "NVRTC", "OPENBLAS", "TORCH", "SINTER")}
print(f"== {' '.join(sys.argv[1:3])}: affinity {len(os.sched_getaffinity(0))} cpus, nice {os.nice(0)}, env {env}", file=log)
try:
    print("   cgroup cpu.max", open("/sys/fs/cgroup/cpu.max").read().strip(), file=log)
except OSError:
    pass
t = time.perf_counter()
p = subprocess.run([os.environ["SINTER_BIN"], *sys.argv[1:]])
wall = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"   wall {wall:.3f} s user {u.ru_utime:.3f} sys {u.ru_stime:.3f} voluntary cs {u.ru_nvcsw} involuntary cs {u.ru_nivcsw} maxrss {u.ru_maxrss} KB", file=log)
sys.exit(p.returncode)
