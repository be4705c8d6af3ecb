#!/usr/bin/env bash
# Session 39, device call 2: call 1 ran out of time before torch's anchor. The decode run of
# old (6593839, C++) / new (PTX, `.maxnreg`) / nomax (PTX without `.maxnreg`, a build of this
# call only) alternated, the PTX module's JIT in fresh processes, then torch's cold compiles of
# the three attention workloads.
source scripts/device_env.sh
D=attention_decode_b32h32kv4096d128_bf16
echo "== decode runs, old / new / nomax alternated ($SECONDS s)"
for r in 1 2 3 4; do
  for v in old new nomax; do
    b=$B; [ $v = old ] && b=$OLD; [ $v = nomax ] && b=$PWD/.bench/sinter_nomax
    SINTER_CACHE_DIR=/tmp/sc_r$v timeout 60 $b bench --backend cuda --workload $D --no-calibrate --iters 50 --json /tmp/r.json 2>&1 | grep -E "^attention" >/dev/null
    python3 -c "import json;d=json.load(open('/tmp/r.json'))['results'][0];print('$r $v ms',d['ms'],'min',d['ms_min'],[c.get('registers') for c in d.get('contractions',[])])"
  done
done
echo "== the PTX module's JIT, fresh processes ($SECONDS s)"
for i in 1 2 3; do
  rm -rf /tmp/sc_log; CUDA_CACHE_DISABLE=1 SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_log timeout 60 $B bench --backend cuda --workload $D --no-calibrate --iters 3 --warmup 1 2>&1 | grep -oE "load of 1 kernels in [0-9.]+ s|PTX modules JIT-compiled beside it in [0-9.]+ s" | tr '\n' ' '; echo
done
echo "== torch ($SECONDS s)"
W=$D,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16
timeout 300 python3 .bench/torch_anchor.py --modes eager,default --only $W --out $OUT/torch.json 2>&1 | grep -E " default | eager " | cut -c1-120
echo "== done ($SECONDS s)"
