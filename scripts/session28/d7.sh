#!/usr/bin/env bash
# Session 28, device call 7: WGSL through Vulkan, attention fused (the FMA flash kernel) against
# three kernels (SINTER_FUSE_ATTENTION=0), f32, b8 h16, 256-2048 tokens, head dims 64 and 128
# (`.pack/attn/attn_s{S}_d{D}.onnx`, random inputs), alternating.
source scripts/device_env.sh
export SINTER_REQUIRE_GPU=1
for d in 64 128; do for s in 256 512 1024 2048; do
  f=.pack/attn/attn_s${s}_d${d}.onnx
  for v in fused unfused; do
    fa=1; [ $v = unfused ] && fa=0
    echo "s$s d$d $v: $(SINTER_FUSE_ATTENTION=$fa SINTER_CACHE_DIR=/tmp/sc_$v timeout 100 $B bench --backend wgsl --model $f --iters 10 --warmup 2 --no-calibrate 2>&1 | grep -E '^attn_s' | tr -s ' ' | cut -d' ' -f2-4)"
  done
done; done
echo "== done ($SECONDS s)"
