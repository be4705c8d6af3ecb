#!/usr/bin/env bash
# Session 17, device call 9 (issue 12): keys past kv: the bound or the key opaque to the compiler; kv 129, 160, 192.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
timeout 150 .wtest/wgsl_attention --ignored --test-threads=1 --nocapture coop_failure_probe 2>&1 | grep -E "ok$|FAILED|does not|panicked|test result" | sed 's/nan_guard: false, split_scale: false //' | cut -c1-330
echo "== done ($SECONDS s)"
