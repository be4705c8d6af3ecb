#!/usr/bin/env bash
# Session 29, device call 7: short-row reductions of several rows a thread (the depthwise windows)
# unroll their walk by a row of taps past 128 bodies. The suite (its ConvNeXt block on CUDA), then
# the build before (old) against it (new), alternating, each a fresh process with every cache off:
# ConvNeXt-Tiny twice, EfficientNet-B0 (5x5 windows) once, f32 and bf16: cold compile and run time.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
zoo_export convnext_tiny,efficientnet_b0
for mr in convnext_tiny:1 convnext_tiny:2 efficientnet_b0:1; do m=${mr%:*}
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for p in f32 bf16; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 60 $b bench --backend cuda --model $f $ins --precision $p --iters 20 --warmup 5 --no-calibrate > /tmp/m.log 2>&1
    echo "$m $p $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-90) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs.*slowest: [^,]*' | cut -c1-150)"
  done; done
done
echo "== done ($SECONDS s)"
