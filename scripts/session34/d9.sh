#!/usr/bin/env bash
# Session 34, device call 9: `bench` with untimed runs right before its timed loops (the inputs'
# upload no longer precedes the first timed run). Old (session start) / new alternating, three
# rounds: d64 attention, cos, softmax, matmul_8192_bf16; torch's SDPA through the anchor
# (do_bench) in the same rounds; the device test's per-launch timing after the L2 clear.
source scripts/device_env.sh
t=.cudatest/device_attention
for r in 1 2 3; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    SINTER_CACHE_DIR=/tmp/sc_$v timeout 120 $b bench --backend cuda --workload attention_b8h16s1024d64_bf16,cos_16M_f32,softmax_8192x8192_f32,matmul_8192_bf16 --no-calibrate 2>&1 | grep -E '^(attention|cos|softmax|matmul)' | awk -v r=$r -v v=$v '{print r, v, $1, $4}'
  done
  (cd .bench && timeout 120 python3 torch_anchor.py --only sdpa_flash_b8h16s1024d64_bf16 --modes eager --out /tmp/anchor$r.json 2>&1 | grep -E "^sdpa" | sed "s/^/$r /")
  SINTER_TEST_FILL=normal SINTER_TEST_GAP_BYTES=104857600 SINTER_TEST_CASES="s1024 d64" SINTER_TEST_TUNINGS="wgmma-tma-persistent 64x128 wg1+1 s3" timeout 100 $t --ignored --nocapture --test-threads=1 attention_timing 2>&1 | grep TFLOP | tail -1 | cut -c30-100 | sed "s/^/$r test gap100M: /"
done
echo "== done ($SECONDS s)"
