#!/usr/bin/env bash
# Session 19, device call 4 (issues 10-13): constant KRSC weights permuted on the device at load.
# The convolution tests; the exported ResNet-18 and -50 at batch 8 (warm start, run time); then the
# whole benchmark table beside torch_anchor.py (same call), to see that nothing else moved.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/device_implicit --test-threads=2 > /tmp/impl.log 2>&1; echo "device_implicit rc $?"; grep -E "^test |^test result|FAILED|panicked" /tmp/impl.log | head -12
echo "== (b) exported ResNet-18 and -50, batch 8 ($SECONDS s)"
timeout 300 python3 onnx/models/zoo_check.py --bin $B --models resnet18,resnet50 --exporters legacy --batch 8 --work /tmp/zoo --keep 2>&1 | grep -E "^resnet(18|50) +legacy +dynamic"
for m in resnet18 resnet50; do for i in 1 2; do
  timeout 60 $B bench --backend cuda --model /tmp/zoo/$m/legacy/model.onnx --dim batch=8 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | sed "s/^/$m /"
done; done
echo "== (c) the table ($SECONDS s)"
timeout 420 python3 .bench/torch_anchor.py --modes eager,default --out $OUT/torch.json > /tmp/torch.log 2>&1; echo "torch rc $?"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,matmul_softmax_100_f32,pointwise_chain64_1024_f32,matmul_softmax_4096_bf16,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,matmul_8192_fp8e4m3,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,resnet18_b32_f32
timeout 400 $B bench --backend cuda --workload $W --no-calibrate --json $OUT/sinter.json > /tmp/sinter.log 2>&1; echo "sinter rc $?"
python3 .bench/compare.py $OUT/torch.json $OUT/sinter.json 2>&1 | head -40
cp /tmp/impl.log /tmp/torch.log /tmp/sinter.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
