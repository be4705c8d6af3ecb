#!/usr/bin/env bash
# Session 17, device call 13 (issues 11, 12): the 64-deep stage as the cooperative-matrix matmul's
# default: checks of the matmul (every depth) and attention kernels, then the matmul workloads.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
timeout 100 .wtest/wgsl_run --test-threads=1 cooperative_matrix_matmuls matmul_epilogue > /tmp/wr.log 2>&1; echo "wgsl_run rc $? ($SECONDS s)"
grep -E "FAILED|panicked|test result" /tmp/wr.log | cut -c1-300 | head -5
timeout 100 .wtest/wgsl_attention --test-threads=1 cooperative_matrices_match > /tmp/wa.log 2>&1; echo "wgsl_attention rc $? ($SECONDS s)"
grep -E "FAILED|panicked|test result" /tmp/wa.log | cut -c1-300 | head -5
for w in matmul_8192_bf16:SINTER_WGSL_BF16_AS_F16 matmul_4096_f32:SINTER_WGSL_F32_AS_F16; do
  name=${w%%:*}; var=${w##*:}
  env $var=1 timeout 100 $B bench --backend wgsl --workload $name --no-calibrate --json $OUT/wgsl_coop_$name.json 2>&1 | grep -E "$name|error|coop" | head -3
done
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
