#!/usr/bin/env bash
# Session 10, device call 6: channels-last inputs for cuDNN's convolutions. Correctness (the
# channels-last chain and the awkward convolutions on cuDNN), then resnet18_b32_f32 with and
# without channels-last beside torch, ResNet-50 b8 f32/bf16 with and without, ConvNeXt-Tiny.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SINTER_REQUIRE_CUDNN=1 timeout 120 .cudatest/device_implicit cudnn --test-threads 1 --nocapture > "$OUT/cudnn.log" 2>&1
echo "cudnn rc=$? $(grep -E "^test result" "$OUT/cudnn.log" | tail -1)"; grep -E "FAILED|panicked|chain ok" -A4 "$OUT/cudnn.log" | head -16
SINTER_CUDA_LIBRARY=force timeout 100 .cudatest/device_implicit implicit_convs resnet18 --test-threads 1 --nocapture > "$OUT/forced.log" 2>&1
echo "forced rc=$? $(grep -E "^test result" "$OUT/forced.log" | tail -1)"; grep -E "FAILED|panicked|rel L2" -A3 "$OUT/forced.log" | head -8
PYTHONUNBUFFERED=1 timeout 100 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32 --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; echo "torch rc=$?"
timeout 60 $BIN bench --backend cuda --workload resnet18_b32_f32 --json "$OUT/sinter.json" 2>&1 | grep -E "resnet18|check|error" | cut -c1-200
SINTER_CHANNELS_LAST=0 timeout 60 $BIN bench --backend cuda --workload resnet18_b32_f32 --json "$OUT/nchw.json" 2>&1 | grep resnet18 | cut -c1-200
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json" | tail -2
timeout 60 $BIN profile --backend cuda --workload resnet18_b32_f32 --out /tmp/prof > /dev/null 2>&1; python3 scripts/session9/top.py /tmp/prof 8 2>&1 | tail -9
PYTHONUNBUFFERED=1 timeout 200 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50,convnext_tiny \
  --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -7
SINTER_CHANNELS_LAST=0 PYTHONUNBUFFERED=1 timeout 100 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50 --no-torch-timing \
  --exporters legacy --batch 8 --bf16 --iters 10 2>&1 | tail -5
