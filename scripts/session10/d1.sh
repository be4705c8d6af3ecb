#!/usr/bin/env bash
# Session 10, device call 1: cuDNN convolutions. Correctness (awkward convolutions through cuDNN
# against the CPU reference; forced onto cuDNN: the implicit tests and ResNet-18 reduced), then
# resnet18_b32_f32 beside torch (with and without cuDNN in the same call), then ResNet-50 at
# batch 8 in f32 and bf16 against torch.compile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
SINTER_REQUIRE_CUDNN=1 timeout 150 .cudatest/device_implicit cudnn --test-threads 1 --nocapture > "$OUT/cudnn.log" 2>&1
echo "cudnn rc=$? $(grep -E "^test result" "$OUT/cudnn.log" | tail -1)"; grep -E "FAILED|panicked|cuDNN|own template" -A2 "$OUT/cudnn.log" | head -30
SINTER_CUDA_LIBRARY=force timeout 150 .cudatest/device_implicit implicit_convs resnet18 --test-threads 1 --nocapture > "$OUT/forced.log" 2>&1
echo "forced rc=$? $(grep -E "^test result" "$OUT/forced.log" | tail -1)"; grep -E "FAILED|panicked|rel L2" -A3 "$OUT/forced.log" | head -12
PYTHONUNBUFFERED=1 timeout 100 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32 --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; echo "torch rc=$?"
timeout 60 $BIN bench --backend cuda --workload resnet18_b32_f32 --json "$OUT/sinter.json" 2>&1 | grep -vE '^#' | cut -c1-200
SINTER_CUDNN=0 timeout 60 $BIN bench --backend cuda --workload resnet18_b32_f32 --json "$OUT/sinter_nocudnn.json" 2>&1 | grep -vE '^#' | cut -c1-200
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json" | tee "$OUT/compare.txt"
timeout 60 $BIN profile --backend cuda --workload resnet18_b32_f32 --out "$OUT/prof" > /dev/null 2>&1; python3 scripts/session9/top.py "$OUT/prof" 12 2>&1 | tail -16
PYTHONUNBUFFERED=1 timeout 150 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50 \
  --exporters legacy --batch 8 --bf16 --iters 10 --json "$OUT/zoo.json" 2>&1 | tail -8
