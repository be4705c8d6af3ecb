#!/usr/bin/env bash
# Session 15, device call 2 (issue 12): the ping-pong tiles with O rescaled between the issues of
# Q K^T and P V (FlashAttention-3's order) and the non-persistent TMA tile's last stage fixed,
# against the interpreter; timed beside torch's SDPA; ncu's source view of the persistent causal
# d128 tile (stall samples per SASS instruction, analysed off the device).
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t=.cudatest/device_attention
echo "== (a) against the interpreter ($SECONDS s)"
F="wgmma-tma,wgmma-pp 128x128 wg2+1 s3,wgmma-pp 64x128 wg1+1 s3"
SINTER_TEST_TUNINGS="$F" timeout 250 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked" /tmp/a.log | head -12
echo "== (b) timing ($SECONDS s)"
F="wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 128x128 wg2+1 s3,wgmma-tma-persistent 64x128 wg1+1 s3,wgmma 64x128 wg1 s2,wgmma-tma 64x128 wg1+1 s3"
SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
grep TFLOP /tmp/b.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep -v "^vit\|decode"
python3 scripts/torch_sdpa.py 2>&1 | grep -v "s1 "
echo "== (c) ncu source view, persistent 128x128 s3, causal d128 ($SECONDS s)"
SINTER_TEST_TUNINGS="wgmma-tma-persistent 128x128 wg2+1 s3" timeout 200 ncu --clock-control none --set full --import-source yes -k regex:attention --launch-skip 103 --launch-count 1 -f -o /tmp/attn \
  $t --ignored --test-threads=1 attention_timing > /tmp/c1.log 2>&1; echo "ncu rc $?"; tail -3 /tmp/c1.log
ncu -i /tmp/attn.ncu-rep --page source --csv --print-source sass > /tmp/attn_sass.csv 2>/tmp/c2.log; echo "source rc $? $(wc -l < /tmp/attn_sass.csv) lines"
ncu -i /tmp/attn.ncu-rep --page details --csv > /tmp/attn_details.csv 2>/dev/null
gzip -c /tmp/attn_sass.csv > $OUT/attn_sass.csv.gz; gzip -c /tmp/attn_details.csv > $OUT/attn_details.csv.gz
cp /tmp/a.log /tmp/b.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
