#!/usr/bin/env bash
# Session 15, device call 6 (issue 12): the final code: the shared suite's attention cases, the
# dynamic-batch device tests (fixed-grid default), the d64 default tile (persistent) against the
# interpreter, then `sinter bench` on the attention workloads beside torch_anchor.py and torch's SDPA.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) checks ($SECONDS s)"
timeout 120 .cudatest/suite --test-threads=4 attention > /tmp/s.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED" /tmp/s.log | head -5
timeout 150 .cudatest/device_dynamic --test-threads=1 > /tmp/d.log 2>&1; echo "dynamic rc $?"; grep -E "^test |^test result|panicked" /tmp/d.log | head -12
SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3,wgmma 64x128 wg1 s2" timeout 150 .cudatest/device_attention --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -8
echo "== (b) sinter bench beside torch ($SECONDS s)"
B=.bench/sinter
W=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
timeout 150 $B bench --backend cuda --workload $W --json $OUT/default.json 2>&1 | grep -E "^attention|error" | head -6
timeout 200 python3 .bench/torch_anchor.py --only $W --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "ceiling" | head -2
python3 .bench/compare.py $OUT/torch.json $OUT/default.json 2>&1 | tail -5
python3 scripts/torch_sdpa.py 2>&1 | grep -v "s1 "
cp /tmp/a.log /tmp/d.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
