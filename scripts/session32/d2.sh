#!/usr/bin/env bash
# Session 32, device call 2. The decode template against the tensor-core tile at b32 h32 kv4096
# d128 bf16: (1) max-autotune's timer over every candidate (SINTER_LOG=autotune), the template's
# unroll capped at 4 (as shipped) and at 8 (SINTER_DECODE_UNROLL, an experiment of this call);
# (2) default-mode `bench`, two rounds: the tile (SINTER_DECODE_TILE=1, the old default), the
# template at 256 threads unrolled 4 (the new default), unrolled 8, and 512 threads.
source scripts/device_env.sh
D=attention_decode_b32h32kv4096d128_bf16
for U in 4 8; do
  echo "== max-autotune, unroll cap $U ($SECONDS s)"
  SINTER_DECODE_UNROLL=$U SINTER_CACHE_DIR=/tmp/sc_m$U SINTER_LOG=autotune timeout 150 $B bench --backend cuda --mode max-autotune --workload $D --iters 50 --no-calibrate 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "ns$|ns\)$|^$D" | sed 's/.*autotune: //' | cut -c1-200
done
echo "== default mode, two rounds ($SECONDS s)"
for r in 1 2; do
  for v in tile t256u4 t256u8 t512u4; do
    case $v in tile) E="SINTER_DECODE_TILE=1";; t256u4) E="SINTER_DECODE_BLOCK=256";; t256u8) E="SINTER_DECODE_BLOCK=256 SINTER_DECODE_UNROLL=8";; t512u4) E="SINTER_DECODE_BLOCK=512";; esac
    rm -rf /tmp/sc_w; echo "$v $(env $E CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w timeout 90 $B bench --backend cuda --workload $D --iters 100 --warmup 20 --no-calibrate 2>&1 | grep -E "^$D" | tr -s ' ' | cut -c1-150)"
  done
done
echo "== done ($SECONDS s)"
