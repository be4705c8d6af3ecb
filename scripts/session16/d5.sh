#!/usr/bin/env bash
# Session 16, device call 5 (issue 12): the exported workloads' score scale folded into the exponent.
# The shared suite's attention cases (written-out bf16 exports among them) and the default tiles
# against the interpreter, then `sinter bench` beside torch_anchor.py in the same call.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== (a) checks ($SECONDS s)"
timeout 100 .cudatest/suite --test-threads=4 attention > /tmp/s.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED" /tmp/s.log | head -5
SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3,wgmma-tma 128x128 wg2+1 s3" timeout 100 .cudatest/device_attention --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -5
echo "== (b) sinter bench beside torch ($SECONDS s)"
A=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
timeout 100 .bench/sinter bench --backend cuda --workload $A --json $OUT/default.json 2>&1 | grep -E "^attention|error" | head -4
timeout 150 python3 .bench/torch_anchor.py --only $A --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "ceiling" | head -2
python3 .bench/compare.py $OUT/torch.json $OUT/default.json 2>&1 | tail -4
python3 scripts/torch_sdpa.py 2>&1 | grep -v "s1 "
timeout 60 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 3 --launch-count 2 --metrics gpu__time_duration.sum .bench/sinter bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 2>&1 | grep -E "gpu__time" | head -4
cp /tmp/a.log /tmp/s.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
