#!/usr/bin/env bash
# Session 29, device call 5: a load compiles the convolutions' KRSC weight permutations in its
# parallel NVRTC batch (not one by one at each step), and light-source units close at 24 KB as
# well as at 8 sources. The suite and the channels-last cuDNN device tests, then HEAD before the
# change (old) against it (new), alternating, each a fresh process with every cache off:
# ResNet-18, ConvNeXt-Tiny (f32, bf16) and ViT-B/16 (bf16) cold compiles and run times.
source scripts/device_env.sh
export SINTER_REQUIRE_CUDNN=1
echo "== tests ($SECONDS s)"
echo "-- suite: $(timeout 120 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device_implicit cudnn_: $(timeout 150 .cudatest/device_implicit cudnn_ 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
zoo_export resnet18,convnext_tiny,vit_b_16
echo "== old/new ($SECONDS s)"
for r in 1 2; do
  for mp in resnet18:f32 resnet18:bf16 convnext_tiny:f32 convnext_tiny:bf16 vit_b_16:bf16; do
    m=${mp%:*}; p=${mp#*:}; f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
    for v in old new; do b=$B; [ $v = old ] && b=$OLD
      rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $b bench --backend cuda --model $f $ins --precision $p --iters 10 --warmup 3 --no-calibrate > /tmp/m.log 2>&1
      echo "$m $p $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-100)"
      echo "    $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs.*slowest: [^;]*|[0-9]+ library steps [0-9.]+ s \(plans [0-9.]+ s\)' | tr '\n' ' ' | cut -c1-330)"
    done
  done
done
echo "== done ($SECONDS s)"
