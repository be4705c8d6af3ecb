#!/usr/bin/env bash
# Session 30, device call 3: NVRTC batches in worker processes (`sinter __nvrtc-worker`, new) against
# threads of one process (SINTER_NVRTC_PROCESSES=0, as before), and the session's start build
# (old), each a fresh process with every cache off, two rounds: cold compile and run time of the
# CNNs and transformers at batch 8, f32 and bf16; matmul_softmax_100_f32 (two kernels); the suite.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device_implicit: $(timeout 100 .cudatest/device_implicit 2>&1 | grep -E '^test result|FAILED|panicked' | head -3)"
zoo_export resnet18,convnext_tiny,efficientnet_b0,vit_b_16,gpt2
run() { # model precision label binary env...
  local m=$1 p=$2 v=$3 b=$4; shift 4
  local f=/tmp/zoo/$m/legacy/model.onnx ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m; env "$@" CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 60 $b bench --backend cuda --model $f $ins --precision $p --iters 20 --warmup 5 --no-calibrate > /tmp/m.log 2>&1
  echo "$m $p $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c5-80) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs.*slowest: [^;]*' | sed 's/(0 from.*batches/(/' | cut -c1-150)"
}
echo "== models ($SECONDS s)"
for r in 1 2; do for mp in resnet18:bf16 resnet18:f32 convnext_tiny:bf16 convnext_tiny:f32 efficientnet_b0:bf16 vit_b_16:bf16 gpt2:bf16; do
  m=${mp%:*}; p=${mp#*:}
  run $m $p processes $B X=1
  run $m $p threads $B SINTER_NVRTC_PROCESSES=0
  [ $r = 1 ] && case $m in resnet18|convnext_tiny) run $m $p old $OLD X=1;; esac
done; done
echo "== matmul_softmax_100_f32 ($SECONDS s)"
for r in 1 2 3; do for v in processes threads; do e=X=1; [ $v = threads ] && e=SINTER_NVRTC_PROCESSES=0
  rm -rf /tmp/sc_w; env $e CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w timeout 60 $B bench --backend cuda --workload matmul_softmax_100_f32 --no-calibrate 2>&1 | grep -E "^matmul" | tr -s ' ' | sed "s/^/$v /" | cut -c1-120
done; done
echo "-- leftover workers: $(pgrep -fc __nvrtc-worker)"
echo "== done ($SECONDS s)"
