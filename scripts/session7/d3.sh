#!/usr/bin/env bash
# Session 7, device call 3: the TMA ping-pong tile as the d128 default on sm_90a and the tiled
# CUDA-core attention with vector shared-memory reads. Every attention tuning against the
# interpreter, the TMA matmul map test, every candidate timed (the benchmark shapes, non-causal
# d128, ViT-B/16's f32 attention), the attention workloads beside torch in the same call, then
# the zoo models (ViT-B/16, ResNet-18, BERT, GPT-2) beside torch eager and torch.compile.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 200 .cudatest/device_attention --test-threads 1 --nocapture attention_matches > "$OUT/attn.log" 2>&1; echo "device_attention rc=$?"
grep -E "FAILED|tunings run per engine|test result|panicked" "$OUT/attn.log" | head -20
timeout 60 .cudatest/device_matmul --test-threads 1 tma_tensor_maps 2>&1 | grep -E "test result|FAILED|panicked"
timeout 150 .cudatest/device_attention --ignored --nocapture --test-threads 1 attention_timing > "$OUT/timing.log" 2>&1; echo "timing rc=$?"
awk '/^$/{p=1} p' "$OUT/timing.log" | grep TFLOP | grep -E "default|wgmma-tma|fma|d128  " | head -60
PYTHONUNBUFFERED=1 timeout 120 python3 .bench/torch_anchor.py --modes eager,default --only attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; tail -1 "$OUT/torch.log"
$BIN bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --json "$OUT/sinter.json" 2>&1 | grep -E "^attention" | cut -c1-200
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json"
timeout 240 python3 onnx/models/zoo_check.py --bin "$BIN" --models vit_b_16,resnet18,bert,gpt2 --exporters legacy --budget-s 170 --json "$OUT/zoo.json" 2>&1 | tail -9
