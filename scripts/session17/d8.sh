#!/usr/bin/env bash
# Session 17, device call 8 (issue 12): the failing m=33 kv=70 case: neighbouring shapes, and with scores as scalars.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
timeout 150 .wtest/wgsl_attention --ignored --test-threads=1 --nocapture coop_failure_probe 2>&1 | grep -E "ok$|FAILED|does not|panicked|test result" | sed 's/nan_guard: false, split_scale: false //' | cut -c1-330
echo "== done ($SECONDS s)"
