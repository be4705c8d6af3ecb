#!/usr/bin/env bash
# Session 27, device call 6: (a) GPT-2 small, BERT-base and ViT-B/16 through WGSL against torch's
# f32 output with the session's default tiles (the zoo, --backend wgsl); (b) `sinter profile`
# through WGSL recording on a fresh device after its compile (GPT-2 small); `sinter run`;
# (c) the CUDA shared suite and `device` tests (no CUDA change this session: a check).
source scripts/device_env.sh
echo "== (a) the zoo through WGSL ($SECONDS s)"
export SINTER_REQUIRE_GPU=1
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zw timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --backend wgsl --models gpt2,bert,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|bert|vit_b_16) .*dynamic" | cut -c1-160
echo "== (b) profile and run through WGSL ($SECONDS s)"
d=/tmp/zoo/gpt2; ins=""; bins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; bins="$bins --input $i"; done
SINTER_CACHE_DIR=/tmp/sc_zw timeout 200 $B profile --backend wgsl --model $d/legacy/model.onnx $bins --iters 3 --out /tmp/pw > /tmp/pw.log 2>&1; echo "profile rc $?"
python3 scripts/profile_top.py /tmp/pw/profile.json 4 2>&1 | head -6
SINTER_CACHE_DIR=/tmp/sc_zw timeout 150 $B run $d/legacy/model.onnx $ins --backend wgsl 2>&1 | grep -E "per run" | cut -c1-200
unset SINTER_REQUIRE_GPU
echo "== (c) CUDA suite and device tests ($SECONDS s)"
timeout 200 .cudatest/suite 2>&1 | grep -E "^test result|FAILED|panicked" | head -5
timeout 150 .cudatest/device 2>&1 | grep -E "^test result|FAILED|panicked" | head -5
echo "== done ($SECONDS s)"
