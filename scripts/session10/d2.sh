#!/usr/bin/env bash
# Session 10, device call 2: why cuDNN's convolutions in sinter run at 62 TFLOP/s where
# torch.compile's ResNet-18 runs at ~106: torch's cuDNN on one ResNet layer in NCHW and in
# channels-last (TF32), whether Inductor switches ResNet-18 to channels-last, and sinter's
# max-autotune (cuDNN's other algorithms timed) on resnet18_b32_f32.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 python3 scripts/session10/conv_layouts.py 2>&1 | tail -30
SINTER_LOG=autotune timeout 200 $BIN bench --backend cuda --mode max-autotune --no-cache --workload resnet18_b32_f32 --json "$OUT/mat.json" > "$OUT/mat.log" 2>&1
grep -E "resnet18_b32" "$OUT/mat.log" | cut -c1-200
grep -E "chose" "$OUT/mat.log" | sed -E 's/Tuning \{//' | cut -c1-200 | head -30
grep -E "conv2d.*library: Some" "$OUT/mat.log" | grep -v chose | cut -c1-160 | head -12
