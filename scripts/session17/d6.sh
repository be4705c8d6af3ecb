#!/usr/bin/env bash
# Session 17, device call 6 (issue 12): which cooperative-matrix attention cases fail after the
# softmax moved to registers (call 5: the d80 GQA BSHD additive-mask case, outputs 1/9 of the
# reference), with neighbours of that case.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
timeout 150 .wtest/wgsl_attention --test-threads=1 --nocapture cooperative_matrices_match > /tmp/wa.log 2>&1; echo "wgsl_attention rc $? ($SECONDS s)"
grep -E "ok$|FAILED|panicked|test result" /tmp/wa.log | sed 's/nan_guard: false, split_scale: false //' | cut -c1-330
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
