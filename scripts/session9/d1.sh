#!/usr/bin/env bash
# Session 9, device call 1 (issue 13's cold compile after the program cache stopped writing
# weights as JSON and identical kernel bodies compile once): the CUDA shared suite (the shared
# body loads), then the four models at issue 13's sizes beside torch.compile (cold compile and
# per-run time), then per-phase compile and per-kernel profiles of BERT-base and GPT-2 (f32).
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 110 .cudatest/suite --test-threads 1 > "$OUT/suite.log" 2>&1; echo "suite rc=$? $(grep -E '^test result' "$OUT/suite.log" | tail -1)"
grep -E "FAILED|panicked" -A3 "$OUT/suite.log" | head -8
timeout 60 .cudatest/device identical_layers --test-threads 1 > "$OUT/device.log" 2>&1; echo "device rc=$? $(grep -E "^test result" "$OUT/device.log" | tail -1)"; grep -E "FAILED|panicked" -A3 "$OUT/device.log" | head -8
PYTHONUNBUFFERED=1 timeout 300 python3 onnx/models/zoo_check.py --bin "$BIN" --models bert,gpt2,vit_b_16,resnet50 \
  --exporters legacy --batch 8 --base --bf16 --iters 10 --budget-s 220 --work /tmp/zoo --keep --json "$OUT/zoo.json" 2>&1 | tail -16
for m in bert gpt2; do
  f=/tmp/zoo/$m/legacy/model.onnx; [ -f "$f" ] || continue
  ins=$(ls /tmp/zoo/$m/input_*.npy | sed 's/^/-i /' | tr '\n' ' ')
  rm -rf /tmp/sc-$m
  SINTER_CACHE_DIR=/tmp/sc-$m timeout 45 $BIN profile --model "$f" $ins --backend cuda --out "$OUT/prof-$m" > "$OUT/prof-$m.log" 2>&1; echo "profile $m rc=$?"
  python3 scripts/session9/top.py "$OUT/prof-$m" 10
done
