#!/usr/bin/env bash
# Session 17, device call 4 (issues 11, 12): staging registers that hold packed bf16 words and f32
# values unconverted until stored (the cooperative-matrix attention and matmul): checks, the parts
# timed for f16 and bf16, the attention and matmul workloads through WGSL with the opt-ins.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export SINTER_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc
B=.bench/sinter
timeout 100 .wtest/wgsl_attention --test-threads=1 --nocapture cooperative_matrices_match > /tmp/wa.log 2>&1; echo "wgsl_attention rc $? ($SECONDS s)"
grep -E "FAILED|panicked|test result|SKIPPED" /tmp/wa.log | cut -c1-300 | head; grep -c "ok$" /tmp/wa.log
SINTER_ATTN_DTYPES=f16,bf16 timeout 200 .wtest/wgsl_attention_timing --ignored --nocapture coop_attention_parts 2>&1 | grep -E "^s |  " | head -24
for w in matmul_8192_bf16:SINTER_WGSL_BF16_AS_F16 matmul_4096_f32:SINTER_WGSL_F32_AS_F16; do
  name=${w%%:*}; var=${w##*:}
  env $var=1 timeout 120 $B bench --backend wgsl --workload $name --scale reduced --check --no-calibrate --iters 3 2>&1 | grep -E "$name|check|error" | head -3
  env $var=1 timeout 120 $B bench --backend wgsl --workload $name --no-calibrate --json $OUT/wgsl_coop_$name.json 2>&1 | grep -E "$name|error|coop" | head -3
done
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --no-calibrate --json $OUT/wgsl_coop_$w.json 2>&1 | grep -E "$w|error|coop" | head -3
done
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
