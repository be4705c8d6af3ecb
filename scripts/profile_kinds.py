"""Groups the kernels of a `sinter profile` folder by kind (the kernel's name without its index;
every product is `matmul`) and lists the first N kernels with their strategies.
`python3 profile_kinds.py DIR/profile.json [N]`"""
import collections
import json
import re
import sys

ks = json.load(open(sys.argv[1]))["kernels"]
first = int(sys.argv[2]) if len(sys.argv) > 2 else 40
kinds = collections.defaultdict(lambda: [0, 0.0])
for k in ks:
    n = re.sub(r"^k\d+_", "", k["name"])
    kind = "matmul" if "matmul" in n else n
    kinds[kind][0] += 1
    kinds[kind][1] += k["stats"]["median_ns"] / 1e3
print(f"{len(ks)} kernels, {sum(v[1] for v in kinds.values()):.1f} us")
for kind, (count, us) in sorted(kinds.items(), key=lambda x: -x[1][1]):
    print(f"{us:8.1f} us x{count:3d} {kind[:60]}")
for k in ks[:first]:
    print(f"   {k['name'][:40]:40s} {k['stats']['median_ns'] / 1e3:7.1f} us {k['strategy'][:60]}")
