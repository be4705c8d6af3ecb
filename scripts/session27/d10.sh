#!/usr/bin/env bash
# Session 27, device call 10: `bench`'s cold compile with NVRTC's own cache bypassed
# (`--no-cache`), in fresh processes twice each, the driver cache on (a fresh CUDA_CACHE_PATH).
source scripts/device_env.sh
export CUDA_CACHE_PATH=/tmp/nvcache
for w in add_relu_mul_10M_f32 attention_b8h16s1024d64_bf16; do
  for r in 1 2; do
    timeout 60 $B bench --backend cuda --workload $w --iters 2 --warmup 1 --no-calibrate 2>&1 | grep -E "^$w" | awk -v r=$r '{print $1, "rep", r, "cold s", $8, "warm s", $9}'
  done
done
du -sh /tmp/nvcache 2>&1
echo "== done ($SECONDS s)"
