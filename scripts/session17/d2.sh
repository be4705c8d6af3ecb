#!/usr/bin/env bash
# Session 17, device call 2 (issue 12): where the WGSL cooperative-matrix attention spends its time:
# the kernel and variants with one part taken out, timed on the H200 through Vulkan.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp
SINTER_ATTN_DIMS=64,128 timeout 200 .wtest/wgsl_attention_timing --ignored --nocapture coop_attention_parts 2>&1 | grep -v "^$" | tail -30
echo "== done ($SECONDS s)"
