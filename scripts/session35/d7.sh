#!/usr/bin/env bash
# Session 35, device call 7: `sinter bench --sustain` (runs back to back for S seconds, then the
# time per run) on the attention and bf16 matmul workloads, beside torch's kernels timed alike
# (`torch_sustained.py`), alternating twice; NVML beside sinter's.
source scripts/device_env.sh
W=attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_bf16
for r in 1 2; do
  timeout 20 python3 scripts/session35/nvml_poll.py 12 "  poll sinter" > /tmp/poll.txt & P=$!
  SINTER_CACHE_DIR=/tmp/sc_a timeout 120 $B bench --backend cuda --workload $W --no-calibrate --sustain 2 --json /tmp/s$r.json 2>&1 | grep -E "^(attention|matmul)|sustained" | sed "s/^/$r /" | cut -c1-150
  wait $P; cat /tmp/poll.txt
  timeout 120 python3 scripts/session35/torch_sustained.py 2 | sed "s/^/$r torch /"
done
echo "== done ($SECONDS s)"
