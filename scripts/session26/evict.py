#!/usr/bin/env python3
"""``evict.py PATH...``: drops every regular file under the PATHs from the page cache
(``posix_fadvise(DONTNEED)``, no root needed; pages a running process has mapped stay), so the
next process reads them from disk as a machine's first process does. Prints files and MB."""
import os, sys

n = size = 0
for root in sys.argv[1:]:
    for dirpath, _, files in os.walk(root, followlinks=False):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                if not os.path.isfile(p) or os.path.islink(p):
                    continue
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                    size += os.fstat(fd).st_size
                finally:
                    os.close(fd)
            except OSError:
                pass
print(f"evicted {n} files, {size / 1e6:.0f} MB")
