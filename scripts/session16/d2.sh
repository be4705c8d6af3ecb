#!/usr/bin/env bash
# Session 16, device call 2: `sinter bench` on the contraction and attention workloads (default;
# own templates only with SINTER_CUDA_LIBRARY=0; max-autotune) beside torch_anchor.py in the same
# call; ncu's cold- and warm-cache duration of the d64 attention kernel against torch's flash kernel.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
B=.bench/sinter
M=matmul_8192_bf16,mlp_8192x4096x16384_bf16,matmul_softmax_4096_bf16
A=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
echo "== (a) sinter bench ($SECONDS s)"
timeout 120 $B bench --backend cuda --workload $M,resnet18_b32_f32,$A --json $OUT/default.json 2>&1 | grep -E "^(matmul|mlp|resnet|attention)|error" | head -12
SINTER_CUDA_LIBRARY=0 timeout 100 $B bench --backend cuda --workload $M,resnet18_b32_f32 --json $OUT/own.json 2>&1 | grep -E "^(matmul|mlp|resnet)|error" | head -8
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --mode max-autotune --no-cache --workload $M --json $OUT/autotune.json > /tmp/at.log 2>&1; echo "autotune rc $?"
grep -E "^(matmul|mlp)" /tmp/at.log | head -6; grep -iE "chose|winner" /tmp/at.log | head -12
echo "== (b) torch ($SECONDS s)"
timeout 240 python3 .bench/torch_anchor.py --only $M,resnet18_b32_f32,$A --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "ceiling" | head -2
for f in default own autotune; do echo "-- $f"; python3 .bench/compare.py $OUT/torch.json $OUT/$f.json 2>&1 | tail -9; done
echo "== (c) ncu: d64 attention, cold and warm caches ($SECONDS s)"
for cc in all none; do
  timeout 60 ncu --cache-control $cc --clock-control none -k regex:^k --launch-skip 3 --launch-count 2 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 2>&1 | grep -E "gpu__time|dram__bytes|^  k" | head -8
  timeout 60 ncu --cache-control $cc --clock-control none -k regex:flash --launch-skip 3 --launch-count 2 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum python3 scripts/torch_sdpa.py 2>&1 | grep -E "gpu__time|dram__bytes|flash" | head -8
done
cp /tmp/at.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
