#!/usr/bin/env bash
# Session 32, device call 5 (the final build: cuBLASLt warmed when the backend opens). The suite,
# `device`'s library tests ( with and without the libraries), then cold compiles of the library
# workloads, old (call 3's build) / new, two rounds alternating, fresh processes, every cache off;
# and the wall time of a whole short process (`sinter bench` of cos, which has no product: the
# backend's drop joins the warm thread).
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device library tests: $(timeout 60 .cudatest/device library 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device without the libraries: $(SINTER_CUDA_LIBRARY=0 timeout 100 .cudatest/device library 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
for w in matmul_4096_f32 mlp_8192x4096x16384_bf16 matmul_softmax_4096_bf16; do for r in 1 2; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=compile timeout 60 $b bench --backend cuda --workload $w --iters 10 --warmup 2 --no-calibrate > /tmp/w.log 2>&1
  echo "$w $v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -d" " -f4,8) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -m1 'cuda load' | grep -oE 'NVRTC [0-9.]+ s|plans [0-9.]+ s' | tr '\n' ' ')"
done; done; done
for r in 1 2; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_w; s=$(date +%s.%N); CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w timeout 60 $b bench --backend cuda --workload cos_16M_f32 --iters 10 --warmup 2 --no-calibrate > /dev/null 2>&1
  echo "whole process, cos, $v: $(echo "$(date +%s.%N) - $s" | bc) s"
done; done
echo "== done ($SECONDS s)"
