#!/usr/bin/env bash
# Session 27, device call 9: is the per-source speed-up between processes NVRTC's own cache?
# libnvrtc 13 keeps PTX and cubins in the CUDA driver's cache (strings: "[nvrtc cache]",
# "Successfully retrieved cached cubin from driver cache", CUDA_CACHE_DISABLE). Each workload
# compiled in fresh processes with an empty sinter cache: twice with CUDA_CACHE_DISABLE=1, then
# twice with the driver cache on (a fresh CUDA_CACHE_PATH).
source scripts/device_env.sh
export CUDA_CACHE_PATH=/tmp/nvcache
for w in add_relu_mul_10M_f32 attention_b8h16s1024d64_bf16; do
  for v in "1 off" "2 off" "3 on" "4 on"; do
    set -- $v
    rm -rf /tmp/sc_c
    if [ $2 = off ]; then d=1; else d=0; fi
    CUDA_CACHE_DISABLE=$d SINTER_CACHE_DIR=/tmp/sc_c SINTER_LOG=compile timeout 60 $B bench --backend cuda --workload $w --iters 2 --warmup 1 --no-calibrate > /tmp/c.log 2>&1
    echo "$w rep $1 driver cache $2: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/c.log | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs' | head -1)"
  done
done
du -sh /tmp/nvcache 2>&1; ls ~/.nv 2>&1 | head -3
echo "== done ($SECONDS s)"
