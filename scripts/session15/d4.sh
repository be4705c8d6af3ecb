#!/usr/bin/env bash
# Session 15, device call 4 (issue 12): the final code (plain ping-pong schedule with O rescaled
# between the issues, persistent tiles as max-autotune candidates) against the interpreter, then
# `sinter bench` on the attention workloads (default and max-autotune) beside torch_anchor.py.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t=.cudatest/device_attention
echo "== (a) against the interpreter ($SECONDS s)"
F="wgmma-tma,wgmma-pp 128x128 wg2+1 s3,wgmma 64x128 wg1 s2,wgmma-ov 128x128 wg2 s3,mma 128x64 w4 s3"
SINTER_TEST_TUNINGS="$F" timeout 280 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -12
echo "== (b) sinter bench beside torch ($SECONDS s)"
B=.bench/sinter
W=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
timeout 150 $B bench --backend cuda --workload $W --json $OUT/default.json 2>&1 | grep -E "attention|error" | head -6
timeout 200 $B bench --backend cuda --mode max-autotune --no-cache --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --json $OUT/autotune.json 2>&1 | grep -E "attention|error" | head -6
timeout 200 python3 .bench/torch_anchor.py --only $W --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "attention|ceiling" | head -8
python3 .bench/compare.py $OUT/torch.json $OUT/default.json $OUT/autotune.json 2>&1 | tail -10
cp /tmp/a.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
