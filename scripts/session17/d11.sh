#!/usr/bin/env bash
# Session 17, device call 11 (issue 12): masked scores as a bit per register, never -inf (call 10: still
# wrong with the comparison gone; the -inf literal folded): the cooperative-matrix attention against the interpreter (its cases, the general
# cases, max-autotune), the parts timed, and the workloads through WGSL beside the FMA kernel and CUDA.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 200 .wtest/wgsl_attention --test-threads=1 --nocapture cooperative_matrices_match fully_masked sequence_lengths > /tmp/wa.log 2>&1; echo "wgsl_attention rc $? ($SECONDS s)"
grep -E "FAILED|panicked|test result|strategies" /tmp/wa.log | sed 's/nan_guard: false, split_scale: false //' | cut -c1-400; grep -c " ok$" /tmp/wa.log
SINTER_ATTN_DIMS=64,128 SINTER_ATTN_DTYPES=f16,bf16 timeout 200 .wtest/wgsl_attention_timing --ignored --nocapture coop_attention_parts 2>&1 | grep -E "^s |  (full|no products|no K|32-key|16-key)" | head -30
W1=attention_b8h16s1024d64_bf16; W2=attention_causal_b8h16s2048d128_bf16
for w in $W1 $W2; do
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --scale reduced --check --no-calibrate --iters 3 2>&1 | grep -E "$w|check|error" | head -2
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --no-calibrate --json $OUT/wgsl_coop_$w.json 2>&1 | grep -E "$w|error|coop" | head -3
  timeout 100 $B bench --backend wgsl --workload $w --no-calibrate --json $OUT/wgsl_fma_$w.json 2>&1 | grep -E "$w|error" | head -3
done
timeout 100 $B bench --backend cuda --workload $W1,$W2 --json $OUT/cuda.json 2>&1 | grep -E "bf16|error" | head -4
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
