#!/usr/bin/env bash
# Session 20, device call 6 (issue 13): ConvNeXt-Tiny f32 at batch 8, the one model at 0.99x
# torch.compile in call 4. sinter's kernels (`sinter profile --model`) beside torch.compile's
# (`torch_top.py`, torch.profiler), same call; the profile comes back for grouping by kind.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/z1 timeout 150 python3 onnx/models/zoo_check.py \
  --bin "$B" --models convnext_tiny --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing 2>&1 | grep -E "legacy +dynamic" | cut -c1-200
f=/tmp/zoo/convnext_tiny/legacy/model.onnx
timeout 90 $B profile --backend cuda --model $f --dim batch=8 --out /tmp/pc > /dev/null 2>&1; echo "profile rc $?"
python3 scripts/profile_top.py /tmp/pc/profile.json 40
cp /tmp/pc/profile.json $OUT/convnext_profile.json
for i in 1 2; do timeout 60 $B bench --backend cuda --model $f --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1; done
timeout 200 python3 scripts/torch_top.py convnext_tiny --batch 8 40 2>&1 | grep -v Warn | tail -45
echo "== done ($SECONDS s)"
