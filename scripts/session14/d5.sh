#!/usr/bin/env bash
# Session 14, device call 5 (issue 11): WGSL through Vulkan on the H200: f32 and bf16 matmuls on
# the FMA path against the f16 cooperative-matrix opt-ins (checked at reduced scale against the
# CPU reference, timed at full scale); CUDA's own-template default (library off: the TMA tile)
# and the library default on the 16-bit matmul workloads beside torch in the same call.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== WGSL ($SECONDS s)"
for w in matmul_4096_f32:SINTER_WGSL_F32_AS_F16 matmul_8192_bf16:SINTER_WGSL_BF16_AS_F16; do
  name=${w%%:*}; var=${w##*:}
  timeout 120 $B bench --backend wgsl --workload $name --scale reduced --check --no-calibrate --iters 5 2>&1 | grep -E "^#|$name|check|error" | head -5
  env $var=1 timeout 120 $B bench --backend wgsl --workload $name --scale reduced --check --no-calibrate --iters 5 2>&1 | grep -E "$name|check|error" | head -5
  timeout 120 $B bench --backend wgsl --workload $name --no-calibrate --json $OUT/wgsl_$name.json 2>&1 | grep -E "$name|error" | head -3
  env $var=1 timeout 120 $B bench --backend wgsl --workload $name --no-calibrate --json $OUT/wgslf16_$name.json 2>&1 | grep -E "$name|error" | head -3
done
echo "== CUDA own template vs library ($SECONDS s)"
W=matmul_8192_bf16,mlp_8192x4096x16384_bf16,matmul_softmax_4096_bf16
SINTER_CUDA_LIBRARY=0 timeout 150 $B bench --backend cuda --workload $W --json $OUT/own.json 2>&1 | grep -E "bf16|error" | head -6
timeout 150 $B bench --backend cuda --workload $W --json $OUT/lib.json 2>&1 | grep -E "bf16|error" | head -6
timeout 200 python3 .bench/torch_anchor.py --only $W --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "bf16|ceiling" | head -8
python3 .bench/compare.py $OUT/torch.json $OUT/own.json $OUT/lib.json 2>&1 | tail -12
echo "== done ($SECONDS s)"
