#!/usr/bin/env bash
# Session 30, device call 6: the final build (pooled NVRTC workers, no prewarm). The suite and the
# implicit-GEMM device tests; ResNet-18, ConvNeXt-Tiny and ViT-B/16 bf16 each a fresh process,
# every cache off, checked against the CPU reference (`--check`), cold compile and run; the zoo's
# check of the same models through `sinter run`.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
zoo_export resnet18,convnext_tiny,vit_b_16
for mp in resnet18:bf16 convnext_tiny:bf16 vit_b_16:bf16 resnet18:f32; do m=${mp%:*}; p=${mp#*:}
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $B bench --backend cuda --model $f $ins --precision $p --iters 10 --warmup 3 --check --no-calibrate > /tmp/m.log 2>&1
  echo "$m $p: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c5-200) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs[^;]*;' )"
done
echo "== done ($SECONDS s)"
