#!/usr/bin/env bash
# Session 40, device call 1: the shape-generic attention kernels compiled at build time. Old is
# the same binary with SINTER_AOT=0 (every kernel specialized and JIT-compiled by NVRTC).
# Correctness (the generic kernels against the interpreter and the specialized kernels, the shared
# suite, both full workloads checked), one load's split each, old/new cold compiles and runs, and
# torch.compile's cold compiles in the same call. Every section time-boxed.
source scripts/device_env.sh
printf '#!/bin/bash\nSINTER_AOT=0 exec %s "$@"\n' "$B" > /tmp/old.sh; chmod +x /tmp/old.sh; OLD=/tmp/old.sh
echo "== correctness ($SECONDS s)"
timeout 200 .cudatest/device_attention generic_attention --nocapture 2>&1 | grep -E "generic|ok|FAILED|panicked|test result|cubin" | head -30
timeout 200 .cudatest/suite 2>&1 | grep -E "test result|FAILED|panicked" | head -6 | sed "s/^/suite: /"
W1=attention_b8h16s1024d64_bf16; W2=attention_causal_b8h16s2048d128_bf16
for w in $W1 $W2; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  echo -n "$w --check $v: "; SINTER_CACHE_DIR=/tmp/sc_fc$v timeout 120 $b bench --backend cuda --check --no-calibrate --iters 3 --warmup 1 --workload $w 2>&1 | grep -E "^attention" | cut -c1-200
done; done
echo "== one cold load each, split ($SECONDS s)"
for w in $W1 $W2; do for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_log; echo -n "$v: "; CUDA_CACHE_DISABLE=1 SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_log timeout 120 $b bench --backend cuda --workload $w --no-calibrate --iters 3 --warmup 1 2>&1 | grep -E "cuda load of" | head -1 | sed 's/.*cuda load/load/' | cut -c1-400
done; done
echo "== run and cold, old / new ($SECONDS s)"
ab_cold 3 $W1,$W2
echo "== torch ($SECONDS s)"
timeout 240 python3 .bench/torch_anchor.py --modes eager,default --only $W1,$W2 --out $OUT/torch.json 2>&1 | grep -E " default " | cut -c1-110
python3 .bench/compare.py $OUT/torch.json $OUT/new3.json 2>&1 | tail -4
echo "== done ($SECONDS s)"
