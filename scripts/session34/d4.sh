#!/usr/bin/env bash
# Session 34, device call 4: the block-per-row reductions' block size, run time against compile
# time. NVRTC's time grows with the row a thread unrolls (offline: softmax 8192 wide 142 ms at
# 256 threads x 32 floats, 95 at 512 x 16, 71 at 1024 x 8; layernorm_gelu 4096 wide 95 / 72 / 58).
# (a) max-autotune's timer over every reduce tuning of softmax, layernorm_gelu and
# matmul_softmax_4096_bf16's softmax, twice; (b) their default cold compiles.
source scripts/device_env.sh
for r in 1 2; do
  SINTER_LOG=autotune SINTER_CACHE_DIR=/tmp/sc_at$r timeout 250 $B bench --backend cuda --workload softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_4096_bf16 --mode max-autotune --no-cache --no-calibrate 2>&1 | sed -E 's/\x1b\[[0-9;]*m//g' | grep -E "Tuning|^(softmax|layernorm|matmul_softmax)" | grep -vE "mma: Some|library: Some|tile: Some" | sed -E "s/.*DEBUG sinter::autotune: (k[0-9][a-z_]*): Tuning \{ block: ([^,]*), vectorize: ([^,]*), persistent: ([^,]*),.*\}: /\1 block \2 vec \3 pers \4 /" | sed "s/^/$r /" | sort -u | head -60
done
echo "== cold ($SECONDS s)"
for r in 1 2; do for w in softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32 matmul_softmax_4096_bf16; do
  SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_cold$r$w timeout 60 $B bench --backend cuda --workload $w --no-calibrate 2>&1 | grep -E "^(softmax|layernorm|matmul_softmax)" | cut -c1-110
done; done
echo "== done ($SECONDS s)"
