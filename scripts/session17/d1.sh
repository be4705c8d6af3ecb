#!/usr/bin/env bash
# Session 17, device call 1 (issue 12): the WGSL cooperative-matrix flash attention through Vulkan
# on the H200: against the interpreter (its own test, then the general attention test, whose f16
# cases now take it), then timed at full scale beside the FMA kernel and CUDA.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== checks ($SECONDS s)"
timeout 120 .wtest/wgsl_attention --test-threads=1 --nocapture cooperative sequence_lengths > /tmp/wa.log 2>&1; echo "wgsl_attention rc $? ($SECONDS s)"
grep -E "ok$|FAILED|panicked|test result|strateg|SKIPPED" /tmp/wa.log | cut -c1-400 | head -30
W1=attention_b8h16s1024d64_bf16; W2=attention_causal_b8h16s2048d128_bf16
for w in $W1 $W2; do
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --scale reduced --check --no-calibrate --iters 3 2>&1 | grep -E "$w|check|error|coop" | head -4
done
echo "== WGSL timing ($SECONDS s)"
for w in $W1 $W2; do
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --no-calibrate --json $OUT/wgsl_coop_$w.json 2>&1 | grep -E "$w|error" | head -3
  timeout 100 $B bench --backend wgsl --workload $w --no-calibrate --json $OUT/wgsl_fma_$w.json 2>&1 | grep -E "$w|error" | head -3
done
echo "== CUDA ($SECONDS s)"
timeout 100 $B bench --backend cuda --workload $W1,$W2 --json $OUT/cuda.json 2>&1 | grep -E "bf16|error" | head -4
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
