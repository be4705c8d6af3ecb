#!/usr/bin/env bash
# Session 29, device call 1: where the issue-10 workloads' truly cold compiles go (each workload in
# its own fresh process, NVRTC's cache off, SINTER_LOG=compile), their warm starts after session
# 28's cubin-key fix, NVRTC's phases on each one's source alone, and ViT-B/16 / GPT-2 small bf16
# cold compiles by light-source group (SINTER_NVRTC_GROUP).
source scripts/device_env.sh
export INC=/usr/local/cuda/include LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
gcc -O2 scripts/session28/nvrtc_one.c -o /tmp/nvrtc_one -ldl
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,pointwise_chain64_1024_f32,matmul_softmax_100_f32,attention_b8h16s1024d64_bf16
echo "== one process, every workload, NVRTC cache off ($SECONDS s)"
CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc0 timeout 150 $B bench --backend cuda --workload $W --iters 5 --warmup 2 --no-calibrate 2>&1 | grep -vE '^#|^\s*$' | cut -c1-160
for w in ${W//,/ }; do
  echo "== $w alone ($SECONDS s)"
  rm -rf /tmp/sc1; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc1 SINTER_LOG=compile SINTER_DEBUG=/tmp/dbg_$w timeout 60 $B bench --backend cuda --workload $w --iters 3 --warmup 1 --no-calibrate > /tmp/w.log 2>&1
  sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -vE '^\s*$|^#' | grep -vE 'program cache hit' | cut -c1-330 | head -8
  for a in $(find /tmp/dbg_$w -name "*.cu" | head -2); do
    CUDA_CACHE_DISABLE=1 R=3 X1=--no-cache /tmp/nvrtc_one $a | tr '\n' ' '; echo
    CUDA_CACHE_DISABLE=1 R=1 X1=--no-cache X2=--fdevice-time-trace=/tmp/tt.json /tmp/nvrtc_one $a > /dev/null
    python3 scripts/session28/nvrtc_phases.py /tmp/tt.json.json | head -8
  done
done
zoo_export gpt2,vit_b_16
for m in vit_b_16 gpt2; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for g in 8 4 2 1 8 4 2; do
    rm -rf /tmp/sc_m; CUDA_CACHE_DISABLE=1 SINTER_NVRTC_GROUP=$g SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $B bench --backend cuda --model $f $ins --precision bf16 --iters 3 --warmup 1 --no-calibrate > /tmp/m.log 2>&1
    echo "$m group $g: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | cut -c1-600)"
    echo "   $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'compiled in' | head -1 | cut -c1-400)"
    echo "   $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-120)"
  done
done
echo "== done ($SECONDS s)"
