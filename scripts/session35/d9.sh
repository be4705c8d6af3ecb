#!/usr/bin/env bash
# Session 35, device call 9: call 7's sustained comparison with the order controlled (call 8: torch
# had run after sinter's soaks, on a hotter GPU). Per workload, a 4 s idle before each soak and
# the order alternating (torch first on the 1st and 3rd, sinter first on the 2nd and 4th);
# soaks of 1.5 s.
source scripts/device_env.sh
i=0
for w in attention_b8h16s1024d64_bf16 matmul_8192_bf16 attention_causal_b8h16s2048d128_bf16 attention_decode_b32h32kv4096d128_bf16; do
  torch() { sleep 4; timeout 60 python3 scripts/session35/torch_sustained.py 1.5 --only $w | sed "s/^/torch /"; }
  sinter() { sleep 4; SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload $w --no-calibrate --sustain 1.5 2>&1 | grep sustained | sed "s/^ */sinter $w /" | cut -c1-120; }
  if [ $((i % 2)) = 0 ]; then torch; sinter; else sinter; torch; fi
  i=$((i + 1))
done
echo "== done ($SECONDS s)"
