#!/usr/bin/env bash
# Session 7, device call 2: the TMA producer for ping-pong attention (AttnEngine::WgmmaPingPongTma).
# Every attention template and tuning against the interpreter (TMA tiles included), the TMA matmul
# tests after the shared mbarrier wait moved, then every candidate timed at the benchmark shapes,
# and torch's SDPA / torch.compile on the same workloads in the same call.
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 SINTER_CACHE_DIR=/tmp/sc XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 200 .cudatest/device_attention --test-threads 1 --nocapture attention_matches > "$OUT/attn.log" 2>&1; echo "device_attention rc=$?"
grep -E "FAILED|tunings run per engine|test result|panicked" "$OUT/attn.log" | head -20
grep -E "wgmma-tma" "$OUT/attn.log" | awk '{print $NF}' | sort | uniq -c
timeout 60 .cudatest/device_matmul --test-threads 1 tma_tensor_maps 2>&1 | grep -E "test result|FAILED|panicked"
timeout 150 .cudatest/device_attention --ignored --nocapture --test-threads 1 attention_timing > "$OUT/timing.log" 2>&1; echo "timing rc=$?"
awk '/^$/{p=1} p' "$OUT/timing.log" | grep TFLOP | sort -k1,1 -s | head -100
PYTHONUNBUFFERED=1 timeout 120 python3 .bench/torch_anchor.py --modes eager,default --only attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1; tail -2 "$OUT/torch.log"
$BIN bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --json "$OUT/sinter.json" 2>&1 | grep -E "^attention" | cut -c1-200
python3 .bench/compare.py "$OUT/torch.json" "$OUT/sinter.json"
# torchvision ViT-B/16 (random weights, batch 2) exported here, then `sinter profile`: the
# contraction records show the attention kernels' own time (tiled CUDA cores, f32).
timeout 120 python3 - <<'PY' 2>&1 | tail -2
import torch, torchvision
m = torchvision.models.vit_b_16(weights=None).eval()
torch.onnx.export(m, torch.randn(2, 3, 224, 224), "/tmp/vit.onnx", dynamo=False, opset_version=17,
                  input_names=["image"], output_names=["logits"])
print("exported /tmp/vit.onnx")
PY
timeout 150 $BIN profile --model /tmp/vit.onnx --backend cuda --out /tmp/prof_vit 2>&1 | grep -E "Dominant|attention|contraction" | head -8
