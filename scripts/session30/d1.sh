#!/usr/bin/env bash
# Session 30, device call 1. (1) The suite (ConvNeXt blocks: windows walked as tap rows). (2) NVRTC's
# fast-compile level (SINTER_NVRTC_FAST_COMPILE, an experiment: 0 = off, min, mid) on the one-kernel
# workloads: each a fresh process, every cache off, cold compile and run time, two rounds; the
# reduced sizes checked against the CPU reference at each level. (3) The depthwise windows as tap
# rows (new) against the build before (old), and new with fast-compile min: ConvNeXt-Tiny,
# EfficientNet-B0, ResNet-18, f32 and bf16, cold compile and run. (4) ResNet-18 bf16's slowest
# NVRTC units and its kernels (SINTER_DEBUG into $OUT/r18).
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
W1="add_relu_mul_10M_f32 cos_16M_f32 cos_cos_16M_f32 softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32 sum_64M_f32 pointwise_chain64_1024_f32 matmul_softmax_100_f32"
W2="attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16 attention_decode_b32h32kv4096d128_bf16 matmul_4096_f32 matmul_softmax_4096_bf16"
for l in 0 min mid; do
  echo "-- check reduced, fast-compile $l: $(SINTER_NVRTC_FAST_COMPILE=$l SINTER_CACHE_DIR=/tmp/sc_r$l timeout 120 $B bench --backend cuda --workload $(echo $W1 $W2 | tr ' ' ,) --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
done
echo "== one-kernel workloads: level, cold s, ms ($SECONDS s)"
for r in 1 2; do for w in $W1; do for l in 0 min mid; do
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_NVRTC_FAST_COMPILE=$l timeout 60 $B bench --backend cuda --workload $w --iters 20 --no-calibrate > /tmp/w.log 2>&1
  echo "$r $l $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -c1-140)"
done; done; done
for w in $W2; do for l in 0 min mid; do
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_NVRTC_FAST_COMPILE=$l timeout 60 $B bench --backend cuda --workload $w --iters 20 --no-calibrate > /tmp/w.log 2>&1
  echo "1 $l $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -c1-140)"
done; done
grep -E "^workload" /tmp/w.log | head -1
zoo_export convnext_tiny,efficientnet_b0,resnet18
echo "== models ($SECONDS s)"
for mr in convnext_tiny:1 convnext_tiny:2 efficientnet_b0:1 resnet18:1; do m=${mr%:*}
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for p in f32 bf16; do for v in old new newmin; do b=$B; l=0; [ $v = old ] && b=$OLD; [ $v = newmin ] && l=min
    rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_NVRTC_FAST_COMPILE=$l SINTER_LOG=compile timeout 60 $b bench --backend cuda --model $f $ins --precision $p --iters 20 --warmup 5 --no-calibrate > /tmp/m.log 2>&1
    echo "$m $p $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-90) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs.*slowest: [^;]*' | cut -c1-260)"
  done; done
done
echo "== ResNet-18 bf16 kernels ($SECONDS s)"
f=/tmp/zoo/resnet18/legacy/model.onnx; ins=$(for i in /tmp/zoo/resnet18/input_*.npy; do echo -n "--input $i "; done)
rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_DEBUG=$OUT/r18 SINTER_LOG=compile timeout 60 $B bench --backend cuda --model $f $ins --precision bf16 --iters 3 --no-calibrate 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E 'cuda load' | head -1 | cut -c1-1500
du -sh $OUT/r18 2>/dev/null
echo "== done ($SECONDS s)"
