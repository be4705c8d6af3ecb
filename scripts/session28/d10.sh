#!/usr/bin/env bash
# Session 28, device call 10: issue 13's cold-compile ratio in one call: GPT-2 small and ViT-B/16
# at batch 8, f32 and bf16, sinter (`sinter run`, each a fresh process on a fresh machine) against
# torch.compile's first call (default mode; bf16 under autocast), the zoo's own timing. Every
# compiler cache fresh or off: NVRTC's (CUDA_CACHE_DISABLE=1), sinter's, Inductor's and Triton's.
source scripts/device_env.sh
CUDA_CACHE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ti_$$ TRITON_CACHE_DIR=/tmp/tr_$$ OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo_$$ timeout 330 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16 --base --work /tmp/zoo --exporters legacy --batch 8 --bf16 \
  --iters 10 --warmup 3 --budget-s 300 --json $OUT/zoo.json 2>&1 | grep -vE "^\s*$" | tail -14 | cut -c1-230
echo "== done ($SECONDS s)"
