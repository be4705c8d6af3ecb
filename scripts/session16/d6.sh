#!/usr/bin/env bash
# Session 16, device call 6: the final code against the interpreter (the shared suite, the device
# tests, the dynamic batch, convolutions, the mma.sync and TMA matmul tiles with paired epilogues,
# the mma.sync and persistent attention tiles). No timing.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for t in suite device device_dynamic device_implicit; do
  timeout 70 .cudatest/$t --test-threads=2 > /tmp/$t.log 2>&1; echo "$t rc $? ($SECONDS s)"
  grep -E "^test result|FAILED|panicked" /tmp/$t.log | head -6
done
SINTER_TEST_TUNINGS="mma 128x128x64 w2x2 s3,wgmma-tma 128x256x64 c2 s3" timeout 80 .cudatest/device_matmul --test-threads=1 --nocapture matmul_matches_the_interpreter_with_every_tuning > /tmp/mm.log 2>&1; echo "matmul rc $? ($SECONDS s)"
grep -c " ok$" /tmp/mm.log; grep -E "FAILED|test result|panicked" /tmp/mm.log | head -5; grep -v " ok$" /tmp/mm.log | grep -E "^(bf16|f16|f32)" | head -5
SINTER_TEST_TUNINGS="mma 64x64 w4 s2,wgmma-tma-persistent 128x128 wg2+1 s3" timeout 60 .cudatest/device_attention --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "attention rc $? ($SECONDS s)"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -5
cp /tmp/*.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
