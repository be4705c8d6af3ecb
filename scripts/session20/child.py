#!/usr/bin/env python3
"""Runs one ``sinter run`` as zoo_check.py does (a child of a Python that imported torch, every
CPU allowed), with an empty cache, and prints its compile lines: is a compile slower as the child
of such a process than from a shell? ``child.py BIN MODEL INPUT... [--cuda]`` (``--cuda``: the
parent first runs a CUDA kernel through torch and keeps its context, as after the zoo's timing).
"""
import os
import re
import shutil
import subprocess
import sys
import time

import torch  # noqa: F401  (the point: the parent has imported torch)

args = [a for a in sys.argv[1:] if a != "--cuda"]
if "--cuda" in sys.argv:
    x = torch.randn(1024, 1024, device="cuda")
    (x @ x).sum().item()
bin_, model, inputs = args[0], args[1], args[2:]
cache = "/tmp/c_child"
shutil.rmtree(cache, ignore_errors=True)
env = dict(os.environ, SINTER_CACHE_DIR=cache, SINTER_LOG="compile")
cmd = [bin_, "run", model] + sum((["--input", i] for i in inputs), []) + ["--backend", "cuda", "--out", "/tmp/o_child.npz"]
t = time.perf_counter()
p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                   preexec_fn=lambda: os.sched_setaffinity(0, range(os.cpu_count() or 1)))
wall = time.perf_counter() - t
for line in (p.stderr + p.stdout).splitlines():
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    if "compiled in" in line and "INFO" in line or "cuda load" in line:
        print("   " + line.split("sinter::compile: ")[-1][:300])
print(f"   child wall {wall:.2f} s, rc {p.returncode}, env CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING')}")
