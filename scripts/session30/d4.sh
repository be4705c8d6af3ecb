#!/usr/bin/env bash
# Session 30, device call 4: issue 13's model table in one call: the seven models at batch 8
# (8 x 128 tokens), legacy exporter, f32 and bf16 autocast, sinter (`sinter run`, each a fresh
# process) beside torch eager and torch.compile (default mode; bf16 under autocast), the zoo's own
# timing. Every compiler cache fresh or off (NVRTC's, sinter's, Inductor's, Triton's), so both
# sides' first runs are cold compiles.
source scripts/device_env.sh
MODELS=resnet18,resnet50,convnext_tiny,efficientnet_b0,vit_b_16,bert,gpt2
CUDA_CACHE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ti_$$ TRITON_CACHE_DIR=/tmp/tr_$$ OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo_$$ timeout 570 python3 onnx/models/zoo_check.py \
  --bin "$B" --models $MODELS --base --work /tmp/zoo --exporters legacy --batch 8 --bf16 \
  --iters 10 --warmup 3 --budget-s 480 --json $OUT/zoo.json 2>&1 | grep -vE "^\s*$" | tail -40 | cut -c1-330
echo "== done ($SECONDS s)"
