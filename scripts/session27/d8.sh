#!/usr/bin/env bash
# Session 27, device call 8: where the cold compiles of call 2's slowest workloads go
# (matmul_softmax_100_f32 1.09 s, the attention workloads 0.52-1.17 s): each in a fresh process,
# twice with an empty cache, SINTER_LOG=compile.
source scripts/device_env.sh
for w in add_relu_mul_10M_f32 matmul_softmax_100_f32 attention_decode_b32h32kv4096d128_bf16 attention_b8h16s1024d64_bf16 cos_16M_f32; do
  for r in 1 2; do
    rm -rf /tmp/sc_c; SINTER_CACHE_DIR=/tmp/sc_c SINTER_LOG=compile timeout 60 $B bench --backend cuda --workload $w --iters 3 --warmup 1 --no-calibrate > /tmp/c.log 2>&1
    echo "$w rep $r: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/c.log | grep -E 'compiled in [0-9.]+ s[^:]*:|cuda load' | head -2 | cut -c20-330 | tr '\n' ' ')"
  done
done
echo "== one process, every workload ($SECONDS s)"
rm -rf /tmp/sc_c; SINTER_CACHE_DIR=/tmp/sc_c timeout 200 $B bench --backend cuda --no-calibrate --iters 3 --warmup 1 2>&1 | grep -E "^[a-z_0-9]+ +default" | awk '{print $1, "cold", $8}' | head -20
echo "== done ($SECONDS s)"
