#!/usr/bin/env bash
# Session 40, device call 3: the generic kernels dividing by run-time divisors through multipliers (fast division, as CUTLASS's FastDivmod); call 2 read d64 +3%, causal +2.2%. As call 2 otherwise.
source scripts/device_env.sh
printf '#!/bin/bash\nSINTER_AOT=0 exec %s "$@"\n' "$B" > /tmp/old.sh; chmod +x /tmp/old.sh; OLD=/tmp/old.sh
echo "== correctness ($SECONDS s)"
timeout 200 .cudatest/device_attention generic_attention --nocapture 2>&1 | grep -E "generic|ok|FAILED|panicked|test result|cubin" | head -30
W1=attention_b8h16s1024d64_bf16; W2=attention_causal_b8h16s2048d128_bf16
for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  echo -n "$W1 --check $v: "; SINTER_CACHE_DIR=/tmp/sc_fc$v timeout 100 $b bench --backend cuda --check --no-calibrate --iters 3 --warmup 1 --workload $W1 2>&1 | grep -E "^attention" | cut -c1-200
done
echo "== run and cold, old / new ($SECONDS s)"
ab_cold 4 $W1,$W2
echo "== done ($SECONDS s)"
