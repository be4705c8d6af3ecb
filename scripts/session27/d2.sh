#!/usr/bin/env bash
# Session 27, device call 2: (a) `sinter run` through WGSL on a fresh device for timing (GPT-2
# small f32); (b) max-autotune's matmul tiles for GPT-2 through WGSL (the half tiles among the
# candidates; SINTER_LOG=autotune); (c) WGSL attention unfused (three kernels) against the fused
# default; (d) the issue 10/12 table: `sinter bench --backend cuda` beside torch_anchor.py.
source scripts/device_env.sh
zoo_export gpt2,bert
export SINTER_REQUIRE_GPU=1
for m in gpt2 bert; do
  d=/tmp/zoo/$m; ins=""; bins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; bins="$bins --input $i"; done
  echo "== (a) $m wgsl run ($SECONDS s)"
  SINTER_CACHE_DIR=/tmp/sc_w timeout 150 $B run $d/legacy/model.onnx $ins --backend wgsl 2>&1 | grep -E "per run" | cut -c1-200
  echo "== (b) $m wgsl bench default / max-autotune ($SECONDS s)"
  SINTER_CACHE_DIR=/tmp/sc_w timeout 100 $B bench --backend wgsl --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/w_${m}_default.json > $OUT/w_${m}_default.log 2>&1
  grep -E "^model" $OUT/w_${m}_default.log | cut -c1-120
  SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=autotune timeout 300 $B bench --backend wgsl --mode max-autotune --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/w_${m}_tuned.json > /tmp/at_$m.log 2>&1; echo "rc $?"
  sed 's/\x1b\[[0-9;]*m//g' /tmp/at_$m.log > $OUT/w_${m}_tuned.log
  grep -E "^model" $OUT/w_${m}_tuned.log | cut -c1-120
  grep -iE "chose" $OUT/w_${m}_tuned.log | grep -oE "matmul_tile: [^}]*}" | sort | uniq -c
done
echo "== (c) WGSL attention fused / three kernels ($SECONDS s)"
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  timeout 100 $B bench --backend wgsl --workload $w --no-calibrate 2>&1 | grep -E "^$w" | cut -c1-140 | sed "s/^/fused /"
  SINTER_FUSE_ATTENTION=0 timeout 100 $B bench --backend wgsl --workload $w --no-calibrate 2>&1 | grep -E "^$w" | cut -c1-140 | sed "s/^/unfused /"
done
unset SINTER_REQUIRE_GPU
echo "== (d) sinter bench beside torch_anchor.py ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
timeout 200 $B bench --backend cuda --json $OUT/sinter-cuda.json 2>&1 | grep -vE "^\s*$" | grep -v "^#   " | tail -22 | cut -c1-150
timeout 240 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | tail -3
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -30
echo "== done ($SECONDS s)"
