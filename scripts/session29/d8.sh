#!/usr/bin/env bash
# Session 29, device call 8: the final build (the open_walk and Krsc refactors, the unroll
# withdrawn): the suite and `device`, ResNet-18 against torch (zoo_export's check) and its cold
# compile (f32, bf16), matmul_softmax_100_f32's.
source scripts/device_env.sh
echo "-- suite: $(timeout 60 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -3)"
echo "-- device: $(timeout 40 .cudatest/device 2>&1 | grep -E '^test result|FAILED|panicked' | head -3)"
zoo_export resnet18
f=/tmp/zoo/resnet18/legacy/model.onnx; ins=$(for i in /tmp/zoo/resnet18/input_*.npy; do echo -n "--input $i "; done)
for p in f32 bf16; do
  rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m timeout 40 $B bench --backend cuda --model $f $ins --precision $p --iters 10 --warmup 3 --no-calibrate 2>&1 | grep -E '^model' | tr -s ' ' | cut -c1-100
done
CUDA_CACHE_DISABLE=1 timeout 30 $B bench --backend cuda --workload matmul_softmax_100_f32 --iters 50 --warmup 10 --no-calibrate 2>&1 | grep -E '^matmul' | tr -s ' ' | cut -c1-120
echo "== done ($SECONDS s)"
