#!/usr/bin/env bash
# Session 30, device call 5: NVRTC started while the CUDA backend opens its device (`nvrtc::prewarm`:
# a trivial compile in-process and the worker pool started, each worker after a trivial compile)
# against the build before (old: workers started at the first batch, NVRTC initialized by the first
# compile). Each a fresh process, every cache off, two rounds: the one-kernel workloads' cold
# compiles and runs; three models' cold compiles. The suite first.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
W="add_relu_mul_10M_f32 cos_16M_f32 cos_cos_16M_f32 softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32 sum_64M_f32 pointwise_chain64_1024_f32 matmul_softmax_100_f32 attention_b8h16s1024d64_bf16 matmul_4096_f32"
echo "== workloads: round, build, cold s ($SECONDS s)"
for r in 1 2; do for w in $W; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w timeout 60 $b bench --backend cuda --workload $w --iters 10 --no-calibrate > /tmp/w.log 2>&1
  echo "$r $v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -c1-120)"
done; done; done
zoo_export resnet18,convnext_tiny,vit_b_16
echo "== models ($SECONDS s)"
for r in 1 2; do for mp in resnet18:bf16 convnext_tiny:bf16 vit_b_16:bf16; do m=${mp%:*}; p=${mp#*:}
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for v in old new; do b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 60 $b bench --backend cuda --model $f $ins --precision $p --iters 10 --warmup 3 --no-calibrate > /tmp/m.log 2>&1
    echo "$m $p $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c5-80) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs' )"
  done; done; done
echo "== done ($SECONDS s)"
