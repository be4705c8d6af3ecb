#!/usr/bin/env bash
# Session 18, device call 3 (issues 10-12): whole-run timing (two events per run, the CUDA graph
# replayed in reduce-overhead): (a) the device tests; (b) matmul_softmax_100's two kernels under
# ncu; (c) every workload in `sinter bench` beside torch_anchor.py, same call.
source scripts/device_env.sh
echo "== (a) device tests ($SECONDS s)"
timeout 150 .cudatest/device --test-threads=2 > /tmp/device.log 2>&1; echo "device rc $?"; grep -E "^test result|FAILED|panicked" /tmp/device.log | head -8
echo "== (b) matmul_softmax_100 under ncu ($SECONDS s)"
$B bench --backend cuda --workload matmul_softmax_100_f32 --no-calibrate > /dev/null 2>&1
for cc in none all; do
  timeout 60 ncu --cache-control $cc --clock-control none -k regex:^k --launch-skip 8 --launch-count 4 --metrics gpu__time_duration.sum,launch__registers_per_thread \
    $B bench --backend cuda --workload matmul_softmax_100_f32 --iters 8 --warmup 2 --no-calibrate 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time|registers" | cut -c1-90 | sed "s/^/$cc /"
done
echo "== (c) sinter bench beside torch_anchor.py ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
O=pointwise_chain64_1024_f32,matmul_softmax_100_f32
timeout 240 $B bench --backend cuda --workload $W,sum_64M_f32 --json $OUT/sinter-cuda.json 2>&1 | grep -E "^[a-z]" | head -20
timeout 60 $B bench --backend cuda --mode reduce-overhead --workload $O --no-calibrate --json $OUT/sinter-cuda-ro.json 2>&1 | grep -E "^[a-z]" | tail -3
timeout 240 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "ceiling|^[a-z]"
timeout 90 python3 .bench/torch_anchor.py --only $O --modes reduce-overhead --out $OUT/torch-ro.json 2>&1 | grep -E "^[a-z]"
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -24
cp /tmp/device.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
