#!/usr/bin/env bash
# Session 22, device call 6 (issue 13): ConvNeXt-Tiny through WGSL over Vulkan before the
# channels-last regions (the session's base commit 96d7b0e, `.pack/old_sinter`) and after, in one
# call: f32 at batch 8 against torch's CPU output, and each one's kernels by kind.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
source scripts/device_env.sh
export SINTER_REQUIRE_GPU=1
chmod +x .pack/old_sinter
for which in old new; do
  bin=$B; [ $which = old ] && bin=$PWD/.pack/old_sinter
  echo "== $which ($SECONDS s)"
  OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_$which timeout 200 python3 onnx/models/zoo_check.py \
    --bin "$bin" --backend wgsl --models convnext_tiny --work /tmp/zoo --keep --exporters legacy --batch 8 \
    --no-torch-timing 2>&1 | grep -E "^convnext.*dynamic|zoo:" | cut -c1-200
  timeout 120 $bin profile --backend wgsl --model /tmp/zoo/convnext_tiny/legacy/model.onnx --dim batch=8 --out /tmp/p_$which > /dev/null 2>&1
  [ -f /tmp/p_$which/profile.json ] && python3 scripts/profile_kinds.py /tmp/p_$which/profile.json 8
done
echo "== done ($SECONDS s)"
