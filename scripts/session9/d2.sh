#!/usr/bin/env bash
# Session 9, device call 2: a value read by several consumers whose recomputation reads more than
# 4 values is materialized (GPT-2's residual stream), torch's NaN-guarded attention fuses (BERT,
# GPT-2). The CUDA suite and the shared-body device test, the four models beside torch.compile,
# then per-kernel profiles of BERT, GPT-2 and ViT-B/16 (f32) and ResNet-50 (bf16).
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 110 .cudatest/suite --test-threads 1 > "$OUT/suite.log" 2>&1; echo "suite rc=$? $(grep -E '^test result' "$OUT/suite.log" | tail -1)"
grep -E "FAILED|panicked" -A3 "$OUT/suite.log" | head -12
timeout 60 .cudatest/device identical_layers --test-threads 1 > "$OUT/device.log" 2>&1; echo "device rc=$? $(grep -E "^test result" "$OUT/device.log" | tail -1)"; grep -E "FAILED|panicked" -A3 "$OUT/device.log" | head -8
PYTHONUNBUFFERED=1 timeout 300 python3 onnx/models/zoo_check.py --bin "$BIN" --models bert,gpt2,vit_b_16,resnet50 \
  --exporters legacy --batch 8 --base --bf16 --iters 10 --budget-s 220 --work /tmp/zoo --keep --json "$OUT/zoo.json" 2>&1 | tail -16
for spec in bert:f32 gpt2:f32 vit_b_16:f32 resnet50:bf16; do
  m=${spec%%:*}; prec=${spec##*:}
  f=/tmp/zoo/$m/legacy/model.onnx; [ -f "$f" ] || continue
  ins=$(ls /tmp/zoo/$m/input_*.npy | sed 's/^/-i /' | tr '\n' ' ')
  timeout 45 $BIN profile --model "$f" $ins --backend cuda --precision $prec --out "$OUT/prof-$m" > "$OUT/prof-$m.log" 2>&1; echo "profile $m $prec rc=$?"
  python3 scripts/session9/top.py "$OUT/prof-$m" 8
done
