#!/usr/bin/env bash
# Session 34, device call 1: three consumer warpgroups of 160 registers (the producer keeps 32,
# FlashAttention-3's split), so the persistent 192x128 tile fits at d64 and 192x64 at d128.
# (a) The shared suite, `device`, every three-consumer tiling against the interpreter;
# (b) max-autotune's timer over every candidate, twice (d64, causal d128); (c) back to back
# (the device test's timer) the d64 default beside the new tile, and torch's SDPA.
source scripts/device_env.sh
t=.cudatest/device_attention
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device: $(timeout 150 .cudatest/device 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "== (a) three consumers against the interpreter ($SECONDS s)"
F="wgmma-tma-persistent 192x128,wgmma-tma-persistent 192x64,wgmma-tma 192x64,wgmma-pp 192x64,wgmma-tma 192x128"
SINTER_TEST_TUNINGS="$F" timeout 200 $t --test-threads=1 --nocapture attention_matches > /tmp/a.log 2>&1; echo "check rc $?"
grep -cE " ok$" /tmp/a.log; grep -E "FAILED|^test result|panicked|mismatch" /tmp/a.log | head -12
grep -oE "attention wgmma[a-z-]* [0-9x]+ wg3\+1 s[0-9]" /tmp/a.log | sort | uniq -c
echo "== (b) max-autotune, twice ($SECONDS s)"
for r in 1 2; do
  SINTER_LOG=autotune SINTER_CACHE_DIR=/tmp/sc_at$r timeout 220 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --mode max-autotune --no-cache --no-calibrate 2>&1 | sed -E 's/\x1b\[[0-9;]*m//g' | grep -E "AttnTile|attn: None|^attention" | grep -E "engine: WgmmaPingPong|attn: None\)?:|^attention" | sed -E "s/.*DEBUG sinter::autotune: (k0[a-z_]*): .*attn: /\1 /; s/, split_k.*\}: / /" | sed "s/^/$r /" | sort -u | head -40
done
echo "== (c) back to back ($SECONDS s)"
F="wgmma-tma-persistent 64x128 wg1+1 s3,wgmma-tma-persistent 192x128 wg3+1 s2,wgmma-tma 128x128 wg2+1 s3,wgmma-tma-persistent 192x64 wg3+1 s4"
for r in 1 2; do
  SINTER_TEST_CASES="s1024 d64,s2048 d128" SINTER_TEST_TUNINGS="$F" timeout 150 $t --ignored --nocapture --test-threads=1 attention_timing > /tmp/b.log 2>&1; echo "timing rc $?"
  grep TFLOP /tmp/b.log | cut -c1-120
done
(cd scripts && timeout 60 python3 torch_sdpa.py 2>&1 | head -3)
echo "-- bench default: $(SINTER_CACHE_DIR=/tmp/sc_def timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --no-calibrate 2>&1 | grep -E '^attention' | cut -c1-120)"
echo "== (d) NVRTC's ptxas against the driver's ($SECONDS s)"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
timeout 120 python3 scripts/session34/jit_split.py scripts/session34/{cos,softmax,layernorm_gelu}.cu 5
echo "== done ($SECONDS s)"
