#!/usr/bin/env bash
# Session 31, device call 1. (1) Correctness of the header-free sources (f16/bf16 declared by
# render/half.rs, `-minimal`): the shared suite and the f16/bf16-heavy device tests. (2) Cold
# compiles of the issue-10 workloads: the build before (old), the new build (new: no headers,
# -minimal) and the new build without -minimal (nomin), each a fresh process with every cache off,
# two rounds, with SINTER_LOG=compile's load breakdown; run times beside them.
source scripts/device_env.sh
echo "-- suite: $(timeout 150 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
for t in device_attention device_matmul device_fp8 device; do
  echo "-- $t: $(timeout 150 .cudatest/$t 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
done
W="add_relu_mul_10M_f32 cos_16M_f32 cos_cos_16M_f32 softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32 pointwise_chain64_1024_f32 matmul_softmax_100_f32 matmul_softmax_4096_bf16 mlp_8192x4096x16384_bf16 matmul_4096_f32 attention_b8h16s1024d64_bf16"
echo "-- check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 120 $B bench --backend cuda --workload $(echo $W | tr ' ' ,) --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
echo "== cold s / ms, then the load's breakdown ($SECONDS s)"
for r in 1 2; do for w in $W; do for v in old new nomin; do b=$B; m=1; [ $v = old ] && b=$OLD; [ $v = nomin ] && m=0
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_NVRTC_MINIMAL=$m SINTER_LOG=compile timeout 60 $b bench --backend cuda --workload $w --iters 20 --no-calibrate > /tmp/w.log 2>&1
  echo "$r $v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -c1-120)"
  [ $r = 1 ] && sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -E 'cuda load|sinter::compile' | grep -v "^#" | head -3 | cut -c1-700 | sed 's/^/     /'
done; done; done
echo "== the multi-kernel workloads on threads (SINTER_NVRTC_PROCESSES=0) against worker processes ($SECONDS s)"
for w in matmul_softmax_100_f32 matmul_softmax_4096_bf16 mlp_8192x4096x16384_bf16; do for v in new thr new thr; do p=1; [ $v = thr ] && p=0
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_NVRTC_PROCESSES=$p timeout 60 $B bench --backend cuda --workload $w --iters 20 --no-calibrate > /tmp/w.log 2>&1
  echo "$v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -c1-120)"
done; done
grep -E "^workload" /tmp/w.log | head -1
echo "== NVRTC to PTX + the driver's JIT against NVRTC to a cubin (jit_probe.py, -minimal, JIT cache off) ($SECONDS s)"
NVRTC_LIB=$(ls /usr/local/cuda/lib64/libnvrtc.so.1* 2>/dev/null | head -1) CUDA_CACHE_DISABLE=1 X=-minimal REPS=3 timeout 120 python3 scripts/session31/jit_probe.py .pack/src/*.cu 2>&1 | tail -32
echo "== done ($SECONDS s)"
