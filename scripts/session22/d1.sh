#!/usr/bin/env bash
# Session 22, device call 1 (issue 13): ConvNeXt's activations channels-last between its permutes
# (`schedule/channels_last.rs`). (a) the CUDA shared suite; (b) ConvNeXt-Tiny and EfficientNet-B0
# (depthwise convolutions, the storage-order walk's other users) beside torch.compile in f32 and
# bf16; (c) ConvNeXt-Tiny's kernels by kind (`sinter profile`); (d) resnet18_b32_f32 (the
# storage-order rule's earlier users).
# `MODELS` (default convnext_tiny,efficientnet_b0) and `RESNET=0` (skip (d)) let later calls re-run
# part of it (`d2.sh`).
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
echo "== (a) suite ($SECONDS s)"
timeout 150 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models "${MODELS:-convnext_tiny,efficientnet_b0}" --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn" | cut -c1-300
echo "== (c) profile ($SECONDS s)"
f=/tmp/zoo/convnext_tiny/legacy/model.onnx
timeout 90 $B profile --backend cuda --model $f --dim batch=8 --out /tmp/pc > /dev/null 2>&1; echo "profile rc $?"
python3 scripts/profile_kinds.py /tmp/pc/profile.json 40
for i in 1 2; do timeout 60 $B bench --backend cuda --model $f --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1; done
echo "== (d) resnet18 ($SECONDS s)"
[ "${RESNET:-1}" = 0 ] || timeout 120 $B bench --backend cuda --workload resnet18_b32_f32 --no-calibrate 2>&1 | grep -E "^resnet"
echo "== done ($SECONDS s)"
