#!/usr/bin/env bash
# Session 40, device call 4: the one-query decode template shape-generic and compiled at build
# time (it was PTX, 0.09-0.13 s cold). The generic kernels (tiles and decode) against the
# interpreter and the specialized kernels, the decode workload checked, then old (SINTER_AOT=0:
# the PTX decode) / new cold compiles and runs, three rounds.
source scripts/device_env.sh
printf '#!/bin/bash\nSINTER_AOT=0 exec %s "$@"\n' "$B" > /tmp/old.sh; chmod +x /tmp/old.sh; OLD=/tmp/old.sh
echo "== correctness ($SECONDS s)"
timeout 220 .cudatest/device_attention generic_attention --nocapture 2>&1 | grep -E "generic|decode|ok|FAILED|panicked|test result|cubin" | head -30
W=attention_decode_b32h32kv4096d128_bf16
for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  echo -n "$W --check $v: "; SINTER_CACHE_DIR=/tmp/sc_fc$v timeout 100 $b bench --backend cuda --check --no-calibrate --iters 3 --warmup 1 --workload $W 2>&1 | grep -E "^attention" | cut -c1-200
done
rm -rf /tmp/sc_log; echo -n "new split: "; CUDA_CACHE_DISABLE=1 SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_log timeout 100 $B bench --backend cuda --workload $W --no-calibrate --iters 3 --warmup 1 2>&1 | grep -E "cuda load of" | head -1 | sed 's/.*cuda load/load/' | cut -c1-300
echo "== run and cold, old / new ($SECONDS s)"
ab_cold 3 $W
echo "== done ($SECONDS s)"
