#!/usr/bin/env bash
# Session 30, device call 2 (experiments through temporary variables): (1) ConvNeXt-Tiny bf16's
# depthwise windows: whole or as tap rows (SINTER_EXP_WIN), eight or four rows a thread
# (SINTER_EXP_WIN_W); (2) a 64-row tensor-core tile for 16-bit products of at most 64 rows
# (SINTER_EXP_M64: ResNet-18's stem and first stage), ResNet-18 and EfficientNet-B0 bf16; each a
# fresh process, every cache off, two rounds; the suite and the implicit-GEMM device tests with
# each tile; (3) attention d64 in max-autotune against default.
source scripts/device_env.sh
for t in 64x128x64s3 64x128x32s2 64x64x64s3; do
  echo "-- suite $t: $(SINTER_EXP_M64=$t timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -3)"
  echo "-- device_implicit $t: $(SINTER_EXP_M64=$t timeout 100 .cudatest/device_implicit 2>&1 | grep -E '^test result|FAILED|panicked' | head -3)"
done
zoo_export convnext_tiny,efficientnet_b0,resnet18
run() { # model precision label env...
  local m=$1 p=$2 v=$3; shift 3
  local f=/tmp/zoo/$m/legacy/model.onnx ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m; env "$@" CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 60 $B bench --backend cuda --model $f $ins --precision $p --iters 30 --warmup 5 --no-calibrate > /tmp/m.log 2>&1
  echo "$m $p $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-90) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs.*slowest: [^;]*' | cut -c1-200)"
}
echo "== ConvNeXt windows ($SECONDS s)"
for r in 1 2; do
  run convnext_tiny bf16 whole-w8 SINTER_EXP_WIN=whole
  run convnext_tiny bf16 split-w8 SINTER_EXP_WIN=split
  run convnext_tiny bf16 split-w4 SINTER_EXP_WIN=split SINTER_EXP_WIN_W=4
  run convnext_tiny bf16 whole-w4 SINTER_EXP_WIN=whole SINTER_EXP_WIN_W=4
done
run convnext_tiny f32 whole-w4 SINTER_EXP_WIN=whole
run convnext_tiny f32 split-w4 SINTER_EXP_WIN=split
echo "== 64-row tiles ($SECONDS s)"
for r in 1 2; do for t in default 64x128x64s3 64x128x32s2 64x64x64s3; do
  run resnet18 bf16 $t SINTER_EXP_M64=$t
done; done
for t in default 64x128x64s3 64x64x64s3; do run efficientnet_b0 bf16 $t SINTER_EXP_M64=$t; run resnet18 f32 $t SINTER_EXP_M64=$t; done
echo "== attention max-autotune ($SECONDS s)"
for mode in default max-autotune; do
  SINTER_CACHE_DIR=/tmp/sc_at timeout 200 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --mode $mode --iters 50 --no-calibrate 2>&1 | grep -E "^attention|contraction" | cut -c1-200
done
echo "== done ($SECONDS s)"
