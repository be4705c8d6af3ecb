#!/usr/bin/env bash
# Session 17, device call 5 (issue 12): the softmax in registers (unrolled), smaller key tiles as candidates.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
timeout 100 .wtest/wgsl_attention --test-threads=1 --nocapture cooperative_matrices_match fully_masked > /tmp/wa.log 2>&1; echo "wgsl_attention rc $? ($SECONDS s)"
grep -E "FAILED|panicked|test result|SKIPPED" /tmp/wa.log | cut -c1-300 | head; grep -c "ok$" /tmp/wa.log
SINTER_ATTN_DIMS=64,128 SINTER_ATTN_DTYPES=f16,bf16 timeout 200 .wtest/wgsl_attention_timing --ignored --nocapture coop_attention_parts 2>&1 | grep -E "^s |  " | head -60
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --no-calibrate --json $OUT/wgsl_coop_$w.json 2>&1 | grep -E "$w|error|coop" | head -3
done
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
