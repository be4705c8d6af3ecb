#!/usr/bin/env bash
# Session 12, device call 5: GPT-2 small at 8 x 128 in f32 (0.98x torch.compile in call 4): sinter's
# per-kernel profile beside torch.compile's top kernels, same call.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include SINTER_CACHE_DIR=/tmp/sc
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
PYTHONUNBUFFERED=1 timeout 120 python3 onnx/models/zoo_check.py --bin "$BIN" --models gpt2 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --base --iters 10 2>&1 | grep -E "^gpt2 " | tail -2
d=/tmp/zoo/gpt2; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
timeout 90 $BIN profile --backend cuda --model $d/legacy/model.onnx $ins --out /tmp/p_gpt2 > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p_gpt2 25 2>&1 | tail -27
timeout 150 python3 scripts/session12/torch_top_zoo.py gpt2 25 2>&1 | grep -v Warning | tail -27
cp /tmp/p_gpt2/profile.json $OUT/gpt2_profile.json
