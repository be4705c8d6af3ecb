#!/usr/bin/env bash
# Session 9, device call 3: 16-bit and TF32 products from 1e8 FLOP on cuBLASLt in default mode
# (ResNet-50's 1x1 convolutions), checked (device tests), timed beside torch (ResNet-50 f32/bf16,
# resnet18_b32_f32), then where GPT-2's and ViT-B/16's cold compiles go (SINTER_LOG=compile).
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 90 .cudatest/device tensor_core identical_layers --test-threads 1 > "$OUT/device.log" 2>&1; echo "device rc=$? $(grep -E "^test result" "$OUT/device.log" | tail -1)"; grep -E "FAILED|panicked" -A3 "$OUT/device.log" | head -8
PYTHONUNBUFFERED=1 timeout 120 python3 onnx/models/zoo_check.py --bin "$BIN" --models resnet50 \
  --exporters legacy --batch 8 --bf16 --iters 10 --json "$OUT/zoo.json" 2>&1 | tail -8
PYTHONUNBUFFERED=1 timeout 100 python3 .bench/torch_anchor.py --modes eager,default --only resnet18_b32_f32 --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; echo "torch rc=$?"
timeout 60 $BIN bench --backend cuda --workload resnet18_b32_f32 --json "$OUT/sinter.json" 2>&1 | grep -vE '^#' | cut -c1-200
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json" | tee "$OUT/compare.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 onnx/models/zoo_check.py --bin "$BIN" --models gpt2,vit_b_16 --no-torch-timing \
  --exporters legacy --batch 8 --base --iters 10 --work /tmp/zoo --keep 2>&1 | tail -6
for m in gpt2 vit_b_16; do
  f=/tmp/zoo/$m/legacy/model.onnx; [ -f "$f" ] || continue
  ins=$(ls /tmp/zoo/$m/input_*.npy | sed 's/^/-i /' | tr '\n' ' ')
  rm -rf /tmp/cold-$m
  SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/cold-$m timeout 60 $BIN run "$f" $ins --backend cuda --out /tmp/o-$m.npz 2>&1 | grep -E "compiled in|compile [0-9]" | cut -c1-400
done
