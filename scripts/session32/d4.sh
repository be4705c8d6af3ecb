#!/usr/bin/env bash
# Session 32, device call 4. What cuBLASLt's plans wait for in a cold compile: each plan's split
# (handle, descriptors, heuristic, workspace; SINTER_LOG=compile), and a backend-open thread that
# loads the library only (none, as shipped), also makes the handle (handle), or also asks the
# heuristic for a small f32 and bf16 product (heur) (SINTER_CUBLASLT_WARM, an experiment of this
# call); three rounds alternating, fresh processes, every cache off.
source scripts/device_env.sh
for w in matmul_4096_f32 mlp_8192x4096x16384_bf16; do for r in 1 2 3; do for v in none handle heur; do
  rm -rf /tmp/sc_w; SINTER_CUBLASLT_WARM=$v CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=compile timeout 60 $B bench --backend cuda --workload $w --iters 10 --warmup 2 --no-calibrate > /tmp/w.log 2>&1
  echo "$w $v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -d" " -f4,8) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -m1 'cuda load' | grep -oE 'NVRTC [0-9.]+ s|plans [0-9.]+ s|other [0-9.]+ s' | tr '\n' ' ') | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -m2 'cuBLASLt plan' | sed 's/.*cuBLASLt plan//' | tr '\n' ' ')"
done; done; done
echo "== done ($SECONDS s)"
