#!/usr/bin/env bash
# Session 9, device call 4 (issue 13's "report through WGSL too"): the four models at issue 13's
# sizes through WGSL on the device's GPU (Vulkan), torch eager and torch.compile in the same call.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -f "$VK_DRIVER_FILES" ] || unset VK_DRIVER_FILES
BIN=$PWD/.bench/sinter
export SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
$BIN run onnx/models/mlp/model.onnx -i onnx/models/mlp/test_data_set_0/input_0.pb --backend wgsl 2>&1 | grep -E "^# wgsl|adapter|device" | head -3
PYTHONUNBUFFERED=1 timeout 450 python3 onnx/models/zoo_check.py --bin "$BIN" --backend wgsl --models bert,gpt2,vit_b_16,resnet50 \
  --exporters legacy --batch 8 --base --iters 10 --timeout 150 --budget-s 330 --json "$OUT/zoo-wgsl.json" 2>&1 | tail -12
