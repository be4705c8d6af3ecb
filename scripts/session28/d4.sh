#!/usr/bin/env bash
# Session 28, device call 4: every attention candidate timed (max-autotune's timer) with its
# registers, spills and C7512, at ViT-B/16's shape (197 tokens, packed QKV as its legacy export
# reads them, and separate), 256 and 128 tokens (GPT-2 small), and the d64 workload's shape.
source scripts/device_env.sh
tar xJf .pack/srcs.tar.xz -C /tmp
timeout 500 /tmp/srcs/attn_tiles 8x12x197:packed 8x12x197 8x12x256 8x12x128 8x16x1024 2>&1
echo "== done ($SECONDS s)"
