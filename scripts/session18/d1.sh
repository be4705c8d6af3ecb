#!/usr/bin/env bash
# Session 18, device call 1: (a) the WGSL cooperative-matrix kernels as reviewed at the end of
# session 17 (never run on a GPU) against the interpreter; (b) where `bench`'s d64 attention loses
# 2 us to torch.compile: each kernel under ncu right after the harness's L2 clear (dirty L2,
# --cache-control none) and after ncu's own clean flush (--cache-control all); (c) the copy ceiling
# at the memory-bound workloads' own sizes, timed as the anchor times them; (d) the whole table:
# `sinter bench --backend cuda` beside torch_anchor.py in the same call.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
tar xJf .pack/bins.tar.xz
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1
B=.bench/sinter
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) WGSL cooperative-matrix checks ($SECONDS s)"
SINTER_REQUIRE_GPU=1 timeout 150 .wtest/wgsl_attention --test-threads=1 cooperative_matrices_match > /tmp/wa.log 2>&1; echo "wgsl_attention rc $?"
grep -E "FAILED|panicked|test result" /tmp/wa.log | cut -c1-300 | head -5
SINTER_REQUIRE_GPU=1 timeout 100 .wtest/wgsl_run --test-threads=1 cooperative_matrix_matmuls > /tmp/wr.log 2>&1; echo "wgsl_run rc $?"
grep -E "FAILED|panicked|test result" /tmp/wr.log | cut -c1-300 | head -5
echo "== (b) d64 attention and add_relu_mul under ncu ($SECONDS s)"
export SINTER_REQUIRE_CUDA=1
$B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate > /dev/null 2>&1  # fill the cubin cache
for w in attention_b8h16s1024d64_bf16 add_relu_mul_10M_f32; do
  for cc in none all; do
    timeout 60 ncu --cache-control $cc --clock-control none -k regex:^k --launch-skip 4 --launch-count 3 --metrics gpu__time_duration.sum \
      $B bench --backend cuda --workload $w --iters 8 --warmup 2 --no-calibrate 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time" | cut -c1-90 | sed "s/^/sinter $cc /"
  done
  timeout 150 ncu --cache-control none --clock-control none -k regex:"sdpa|flash|fmha|attn|triton" --launch-skip 20 --launch-count 3 --metrics gpu__time_duration.sum \
    python3 .bench/torch_anchor.py --only $w --modes default --out /tmp/tn.json 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time|$w" | cut -c1-90 | sed "s/^/torch none /"
done
echo "== (c) the copy ceiling at the workloads' sizes ($SECONDS s)"
timeout 90 python3 scripts/torch_copy_sizes.py
echo "== (d) sinter bench beside torch_anchor.py ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
timeout 200 $B bench --backend cuda --json $OUT/sinter-cuda.json 2>&1 | grep -vE "^\s*$" | tail -22
timeout 60 $B bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32,matmul_softmax_100_f32 --no-calibrate --json $OUT/sinter-cuda-ro.json 2>&1 | tail -3
timeout 240 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | tail -40
timeout 90 python3 .bench/torch_anchor.py --only pointwise_chain64_1024_f32,matmul_softmax_100_f32 --modes reduce-overhead --out $OUT/torch-ro.json 2>&1 | tail -3
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -30
cp /tmp/wa.log /tmp/wr.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
