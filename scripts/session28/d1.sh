#!/usr/bin/env bash
# Session 28, device call 1: (a) NVRTC's scaling over threads and over processes with its cache
# off (CUDA_CACHE_DISABLE=1), 54 distinct sources (every built-in workload's kernels at full
# size and GPT-2 small bf16's 12 distinct bodies; `nvrtc_par.c`); (b) session 27's unrun call 10
# (`bench`'s cold compile bypasses NVRTC's cache); (c) GPT-2 small and ViT-B/16 bf16 cold
# compiles through `bench --model`, twice each, SINTER_LOG=compile.
source scripts/device_env.sh
tar xJf .pack/srcs.tar.xz -C /tmp
nproc; lscpu | grep -E "Model name|Thread|Core|Socket" | tr -s ' '
export INC=/usr/local/cuda/include LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
F=$(ls /tmp/srcs/*.cu)
echo "== (a) NVRTC scaling, CUDA_CACHE_DISABLE=1 ($SECONDS s)"
for T in 1 2 4 8 16; do CUDA_CACHE_DISABLE=1 /tmp/srcs/nvrtc_par thread $T $F; done
for T in 4 8 16; do CUDA_CACHE_DISABLE=1 /tmp/srcs/nvrtc_par proc $T $F; done
echo "-- the driver cache on, fresh path, twice at 16 threads"
for r in 1 2; do CUDA_CACHE_PATH=/tmp/nvc_a /tmp/srcs/nvrtc_par thread 16 $F; done
echo "== (b) bench cold compile, NVRTC cache bypassed, fresh processes ($SECONDS s)"
export CUDA_CACHE_PATH=/tmp/nvcache_b
for w in add_relu_mul_10M_f32 attention_b8h16s1024d64_bf16; do
  for r in 1 2; do
    timeout 60 $B bench --backend cuda --workload $w --iters 2 --warmup 1 --no-calibrate 2>&1 | grep -E "^$w" | awk -v r=$r '{print $1, "rep", r, "cold s", $8, "warm s", $9}'
  done
done
unset CUDA_CACHE_PATH
echo "== (c) exports ($SECONDS s)"
zoo_export gpt2,vit_b_16
for m in gpt2 vit_b_16; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for r in 1 2; do
    rm -rf /tmp/sc_m; SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $B bench --backend cuda --model $f $ins --precision bf16 --iters 3 --warmup 1 --no-calibrate > /tmp/m.log 2>&1
    echo "$m bf16 rep $r: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'compiled in|cuda load|NVRTC' | head -4 | cut -c1-300 | tr '\n' ' ')"
    sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -vE "^#|^\s*$|INFO|DEBUG" | grep -E "model|cold" | head -3 | cut -c1-200
  done
done
echo "== done ($SECONDS s)"
