"""Prints the paths of the distinct kernel sources in a `kernels/` folder (session 28): sources
equal once each kernel's own name (its file stem) is blanked and comments dropped are one (a
transformer's layers), as the CUDA backend's `body_key` treats them."""
import pathlib, re, sys

seen = {}
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.cu")):
    body = re.sub(r"//[^\n]*", "", p.read_text().replace(p.stem, "K"))
    seen.setdefault(body, p)
print(" ".join(str(p) for p in seen.values()))
