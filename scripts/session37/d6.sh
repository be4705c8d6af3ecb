#!/usr/bin/env bash
# Session 37, device call 6 (final build): library steps' kernels and programs of more than four
# PTX bodies back on NVRTC. Correctness, then cold compiles old/new (fresh processes, every cache
# off) of the one-kernel workloads and ResNet-18 / exported models with library steps.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
for t in suite device device_dynamic; do
  timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/$t: /"
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' | grep -vc "check ok" | sed 's/^/lines without check ok (the header): /'
echo "== cold/run, old / new ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_4096_bf16,pointwise_chain64_1024_f32,resnet18_b32_f32
for r in 1 2; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 200 $b bench --backend cuda --workload $W --no-calibrate 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8}'
  done
done
zoo_export resnet50
for m in resnet50; do for r in 1 2; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m; echo "$r $v $m $(CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m timeout 90 $b bench --backend cuda --model $f $ins --no-calibrate 2>&1 | grep -E '^model' | tr -s ' ' | cut -c1-120)"
done; done; done
echo "== done ($SECONDS s)"
