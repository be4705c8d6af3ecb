#!/usr/bin/env bash
# Session 17, device call 12 (issue 11): the WGSL cooperative-matrix matmul with padded shared rows
# (bank conflicts of the fragment loads) and a 64-deep stage as a max-autotune candidate: checked
# against the interpreter at both depths, then timed (default, and max-autotune's candidates).
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
timeout 120 .wtest/wgsl_run --test-threads=1 --nocapture cooperative_matrix_matmuls > /tmp/wr.log 2>&1; echo "wgsl_run rc $? ($SECONDS s)"
grep -E "FAILED|panicked|test result|SKIPPED|mismatch" /tmp/wr.log | cut -c1-300 | head
for w in matmul_8192_bf16:SINTER_WGSL_BF16_AS_F16 matmul_4096_f32:SINTER_WGSL_F32_AS_F16; do
  name=${w%%:*}; var=${w##*:}
  env $var=1 timeout 100 $B bench --backend wgsl --workload $name --no-calibrate --json $OUT/wgsl_coop_$name.json 2>&1 | grep -E "$name|error|coop" | head -3
done
SINTER_WGSL_BF16_AS_F16=1 SINTER_LOG=autotune timeout 200 $B bench --backend wgsl --workload matmul_8192_bf16 --mode max-autotune --no-calibrate --json $OUT/wgsl_coop_tuned.json > /tmp/tune.log 2>&1; echo "tuned rc $? ($SECONDS s)"
grep -iE "coop|winner|best|matmul_8192" /tmp/tune.log | cut -c1-250 | head -20
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
