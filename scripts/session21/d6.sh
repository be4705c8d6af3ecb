#!/usr/bin/env bash
# Session 21, device call 6: one-query GQA decode with the group's query heads as the rows of
# the tensor-core tile (`pack-gqa`, a kernel-IR rewrite). (a) every tuning of the decode and GQA
# cases against the interpreter (the packed default with an additive mask among them); (b) every
# candidate at the GQA shape beside torch's SDPA with enable_gqa, timed alike.
source scripts/device_env.sh
echo "== (a) checks ($SECONDS s)"
SINTER_TEST_CASES="gqa,decode, m1 " timeout 150 .cudatest/device_attention attention_matches --test-threads=1 --nocapture > /tmp/da.log 2>&1; echo "device_attention rc $?"
grep -E "test result|FAILED|panicked|MISMATCH|mismatch" /tmp/da.log | head -8; grep -E "pack" /tmp/da.log | cut -c1-120 | head -12
echo "== (b) timing ($SECONDS s)"
SINTER_TEST_CASES=gqa timeout 100 .cudatest/device_attention attention_timing --ignored --nocapture --test-threads=1 2>&1 | grep -E "^decode gqa" | sort -u | grep -E "pack|wgmma-ov 64x128|decode block (128|512)  " | cut -c1-150
timeout 60 python3 scripts/session21/torch_gqa.py 2>&1 | grep torch || true
echo "== done ($SECONDS s)"
