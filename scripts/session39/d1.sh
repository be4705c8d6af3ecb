#!/usr/bin/env bash
# Session 39, device call 1: the decode attention template in PTX. Correctness (the shared suite,
# every attention case of device_attention with every tuning, the reduced workloads and the full
# decode workload checked), then old (session start, 6593839) / new cold compiles of the three
# attention workloads (fresh processes, every cache off) with one load's split logged, beside
# torch.compile's cold compiles in the same call, and the decode kernel's timing loop.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
for t in suite device_attention device_dynamic device; do
  timeout 240 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -6 | sed "s/^/$t: /"
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' > /tmp/reduced.txt
grep -vc "check ok" /tmp/reduced.txt | sed 's/^/reduced: lines without check ok (the header): /'
grep -E "^attention" /tmp/reduced.txt | cut -c1-160
for v in old new; do
  b=$B; [ $v = old ] && b=$OLD
  echo -n "full decode --check $v: "; SINTER_CACHE_DIR=/tmp/sc_fc$v timeout 200 $b bench --backend cuda --check --no-calibrate --workload attention_decode_b32h32kv4096d128_bf16 2>&1 | grep -E "^attention" | cut -c1-200
done
echo "== one cold load each, split (new) ($SECONDS s)"
for w in attention_decode_b32h32kv4096d128_bf16 attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  rm -rf /tmp/sc_log; CUDA_CACHE_DISABLE=1 SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_log timeout 120 $B bench --backend cuda --workload $w --no-calibrate --iters 3 --warmup 1 2>&1 | grep -E "cuda load of" | head -1 | sed 's/.*cuda load/load/' | cut -c1-420
done
echo "== run and cold, old / new ($SECONDS s)"
W=attention_decode_b32h32kv4096d128_bf16,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16
ab_cold 3 $W
echo "== torch ($SECONDS s)"
timeout 300 python3 .bench/torch_anchor.py --modes eager,default --only $W --out $OUT/torch.json 2>&1 | grep -E " default " | cut -c1-110
python3 .bench/compare.py $OUT/torch.json $OUT/new3.json 2>&1 | tail -6
echo "== done ($SECONDS s)"
