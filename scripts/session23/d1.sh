#!/usr/bin/env bash
# Session 23, device call 1 (issue 13, ViT-B/16 f32 at a tie with torch.compile): where the time
# goes. (a) every cuBLASLt algorithm the heuristic offers for the transformers' f32 product shapes
# (`examples/gemm_algos`) beside torch's cuBLAS on the same shapes; (b) ViT-B/16 f32 beside
# torch.compile (zoo), sinter's kernels by kind and torch.compile's top kernels; (c) ViT-B/16 under
# max-autotune against default.
source scripts/device_env.sh
SH="1576x2304x768 1576x768x768 1576x3072x768 1576x768x3072 1024x2304x768 1024x768x768 1024x3072x768 1024x768x3072"
echo "== (a) cuBLASLt algorithms ($SECONDS s)"
timeout 120 .bench/gemm_algos f32 $SH $(for s in $SH; do echo $s:bt; done) --algos 16 --reps 30
timeout 60 python3 scripts/session23/torch_gemm.py $SH $(for s in $SH; do echo $s:bt; done)
echo "== (b) ViT-B/16 ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models vit_b_16 --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --iters 10 2>&1 | grep -vE "this process|done in|warn" | cut -c1-300
f=/tmp/zoo/vit_b_16/legacy/model.onnx
timeout 90 $B profile --backend cuda --model $f --dim batch=8 --out /tmp/pv > /dev/null 2>&1; echo "profile rc $?"
python3 scripts/profile_kinds.py /tmp/pv/profile.json 30
timeout 120 python3 scripts/session12/torch_top_zoo.py vit_b_16 25 2>&1 | tail -28
echo "== (c) max-autotune ($SECONDS s)"
for m in default max-autotune; do timeout 200 $B bench --backend cuda --model $f --dim batch=8 --mode $m --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -2; done
echo "== done ($SECONDS s)"
