#!/usr/bin/env bash
# Session 28, device call 9: the final build. The CUDA suite, `device`, and `device_dynamic`
# twice (the load's memory back before NVRTC); through WGSL over Vulkan the d64 attention
# workload (now three kernels by the cost model) and the causal one (fused); ViT-B/16 and GPT-2
# small bf16 cold compiles, old = the tile change only (3c75ac5) against this build.
source scripts/device_env.sh
for t in suite device device_dynamic device_dynamic; do
  echo "-- $t: $(timeout 300 .cudatest/$t 2>&1 | grep -E '^test result|FAILED|panicked' | head -5 | tr '\n' ' ')"
done
echo "== WGSL attention ($SECONDS s)"
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  SINTER_REQUIRE_GPU=1 SINTER_CACHE_DIR=/tmp/sc_w timeout 120 $B bench --backend wgsl --workload $w --iters 10 --warmup 2 --no-calibrate 2>&1 | grep -E "^$w|attention|matmul|softmax" | head -5 | cut -c1-150
done
zoo_export gpt2,vit_b_16
for m in vit_b_16 gpt2; do for r in 1 2; do for v in old new; do
  rm -rf /tmp/sc_$v; ab_bench $m bf16 $v
done; done; done
echo "== done ($SECONDS s)"
