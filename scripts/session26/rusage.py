#!/usr/bin/env python3
"""``rusage.py LABEL CMD...``: runs CMD, prints one line: LABEL, exit code, wall s, the child's
user and sys CPU s, major and minor page faults, voluntary and involuntary context switches, then
the child's ``cuda load`` / ``compiled in`` / ``warm-up`` log lines (ANSI colours removed)."""
import re, resource, subprocess, sys, time

label, cmd = sys.argv[1], sys.argv[2:]
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.perf_counter()
p = subprocess.run(cmd, capture_output=True, text=True)
wall = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
d = lambda f: getattr(r1, f) - getattr(r0, f)
print(f"{label}: rc {p.returncode} wall {wall:.3f} s user {d('ru_utime'):.2f} sys {d('ru_stime'):.2f} "
      f"majflt {d('ru_majflt')} minflt {d('ru_minflt')} vcsw {d('ru_nvcsw')} ivcsw {d('ru_nivcsw')}")
for line in (p.stderr + p.stdout).splitlines():
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    if any(k in line for k in ("cuda load", "compiled in", "warm-up", "compile ", "error")):
        print("   ", line[:400])
