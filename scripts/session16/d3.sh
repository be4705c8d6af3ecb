#!/usr/bin/env bash
# Session 16, device call 3 (issue 12): TMA attention producers prefetching a work tile's key tiles
# into L2. Checks, then back-to-back timing beside torch's SDPA, `sinter bench` (L2 flushed) beside
# torch_anchor.py, and ncu's flushed duration of the d64 kernel against cuDNN's.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 64x128 wg1+1 s3,wgmma-tma-persistent 128x128 wg2+1 s3"
echo "== (a) checks ($SECONDS s)"
SINTER_TEST_TUNINGS="$F" timeout 150 .cudatest/device_attention --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -8
timeout 100 .cudatest/suite --test-threads=4 attention > /tmp/s.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED" /tmp/s.log | head -5
echo "== (b) back to back ($SECONDS s)"
SINTER_TEST_TUNINGS="$F" timeout 120 .cudatest/device_attention --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit\|decode"
python3 scripts/torch_sdpa.py 2>&1 | grep -v "s1 "
echo "== (c) sinter bench beside torch ($SECONDS s)"
A=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16
timeout 100 .bench/sinter bench --backend cuda --workload $A --json $OUT/default.json 2>&1 | grep -E "^attention|error" | head -4
timeout 150 python3 .bench/torch_anchor.py --only $A --modes eager,default --out $OUT/torch.json 2>&1 | grep -E "ceiling" | head -2
python3 .bench/compare.py $OUT/torch.json $OUT/default.json 2>&1 | tail -4
echo "== (d) ncu, flushed ($SECONDS s)"
timeout 60 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 3 --launch-count 2 --metrics gpu__time_duration.sum,dram__bytes_read.sum .bench/sinter bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 2>&1 | grep -E "gpu__time|^  k" | head -8
timeout 60 ncu --cache-control all --clock-control none -k regex:flash --launch-skip 3 --launch-count 2 --metrics gpu__time_duration.sum python3 scripts/torch_sdpa.py 2>&1 | grep -E "gpu__time" | head -4
cp /tmp/a.log /tmp/b.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
