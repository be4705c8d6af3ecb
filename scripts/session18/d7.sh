#!/usr/bin/env bash
# Session 18, device call 7 (issue 11): constant weights of channels-last cuDNN convolutions permuted to KRSC;
# the convolution tests (the constant-weight chain among them), then resnet18_b32_f32 profiled,
# checked at reduced scale, and timed (default, max-autotune) beside torch.compile.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
tar xJf .pack/bins.tar.xz
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1 SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_REQUIRE_CUDNN=1
B=.bench/sinter
R=resnet18_b32_f32
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) convolution tests ($SECONDS s)"
timeout 150 .cudatest/device --test-threads=2 > /tmp/dev.log 2>&1; echo "device rc $?"; grep -E "^test result|FAILED|panicked" /tmp/dev.log | head -4
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test |^test result|FAILED|panicked" /tmp/impl.log | head -12
echo "== (b) resnet18 ($SECONDS s)"
top() { python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
ks = p.get('kernels', [])
tot = sum((k.get('stats') or {}).get('median_ns', 0) for k in ks)
print(f"{len(ks)} kernels, {tot/1e3:.1f} us of kernels per run")
for k in sorted(ks, key=lambda k: -(k.get('stats') or {}).get('median_ns', 0))[:6]:
    st = k.get('stats') or {}
    print(f"{st.get('median_ns',0)/1e3:8.1f} us {k.get('name')[:40]:40s} {str(k.get('strategy'))[:80]}")
PY
}
timeout 60 $B bench --backend cuda --workload $R --scale reduced --check --no-calibrate 2>&1 | grep -E "^$R|check" | head -3
timeout 120 $B profile --backend cuda --workload $R --out /tmp/pd > /dev/null 2>&1; echo "profile default rc $?"; top /tmp/pd/profile.json
timeout 60 $B bench --backend cuda --workload $R --no-calibrate --json $OUT/r18.json 2>&1 | grep -E "^$R"
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --mode max-autotune --workload $R --no-calibrate --json $OUT/r18-mat.json > /tmp/mat.log 2>&1; grep -E "^$R" /tmp/mat.log
sed 's/\x1b\[[0-9;]*m//g' /tmp/mat.log | grep -E "k0_conv2d" | sed -E 's/[a-z_]+: None,? ?//g' | cut -c1-230 | head -24
timeout 150 python3 .bench/torch_anchor.py --only $R --modes eager,default --out $OUT/r18-torch.json 2>&1 | grep -E "^$R"
cp /tmp/impl.log /tmp/mat.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
