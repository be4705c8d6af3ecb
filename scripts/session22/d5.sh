#!/usr/bin/env bash
# Session 22, device call 5 (issue 13): ConvNeXt-Tiny through WGSL over Vulkan on the H200 (the
# channels-last regions are the scheduler's, so WGSL runs them too; never timed through WGSL
# before), f32 at batch 8 against torch's CPU output, beside the CUDA backend in the same call.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
source scripts/device_env.sh
export SINTER_REQUIRE_GPU=1
for be in wgsl cuda; do
  echo "== $be ($SECONDS s)"
  OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_$be timeout 200 python3 onnx/models/zoo_check.py \
    --bin "$B" --backend $be --models convnext_tiny --work /tmp/zoo_$be --keep --exporters legacy --batch 8 \
    --no-torch-timing 2>&1 | grep -E "^convnext|zoo:" | cut -c1-200
done
f=/tmp/zoo_wgsl/convnext_tiny/legacy/model.onnx
timeout 120 $B profile --backend wgsl --model $f --dim batch=8 --out /tmp/pw > /dev/null 2>&1; echo "wgsl profile rc $?"
[ -f /tmp/pw/profile.json ] && python3 scripts/profile_kinds.py /tmp/pw/profile.json 12
echo "== done ($SECONDS s)"
