#!/usr/bin/env bash
# Session 29, device call 4: the issue 10/12 table: `sinter bench --backend cuda` (cold compiles
# with NVRTC's cache bypassed, as `bench` does) beside torch_anchor.py (eager and torch.compile's
# default mode; torch's SDPA for the attention rows), compare.py's table; then the same workloads
# in reduce-overhead. First, where ConvNeXt-Tiny's and ResNet-18's cold compiles go (call 3: 1.2-1.9
# s and 1.5 s): each a fresh process, every cache off, `SINTER_LOG=compile`.
source scripts/device_env.sh
zoo_export convnext_tiny,resnet18
for m in convnext_tiny resnet18; do for p in f32 bf16 f32; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $B bench --backend cuda --model $f $ins --precision $p --iters 3 --warmup 1 --no-calibrate > /tmp/m.log 2>&1
  echo "$m $p: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-100)"
  sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load|compiled in' | head -2 | cut -c1-900
done; done
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
echo "== sinter bench ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_b timeout 240 $B bench --backend cuda --workload $W --json $OUT/sinter-cuda.json 2>&1 | grep -vE "^\s*$" | grep -v "^#   " | tail -22 | cut -c1-160
echo "== torch_anchor ($SECONDS s)"
TORCHINDUCTOR_CACHE_DIR=/tmp/ti_$$ TRITON_CACHE_DIR=/tmp/tr_$$ timeout 260 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | tail -3
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -32
echo "== reduce-overhead ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_b timeout 60 $B bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32,matmul_softmax_100_f32 --iters 200 --warmup 50 --no-calibrate 2>&1 | grep -E "^(pointwise|matmul)" | cut -c1-160
echo "== done ($SECONDS s)"
