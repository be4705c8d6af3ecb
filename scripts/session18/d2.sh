#!/usr/bin/env bash
# Session 18, device call 2 (issue 10): (a) the CUDA shared suite and device tests with the
# one-step reduction for latency-bound CUDA-core products; (b) matmul_softmax_100 and chain64 in
# `sinter bench` beside torch (do_bench and per-call wall time); (c) max-autotune timing each
# candidate after an L2 clear, against the default, on the memory-bound workloads and d64 attention.
source scripts/device_env.sh
echo "== (a) checks ($SECONDS s)"
timeout 240 .cudatest/suite --test-threads=4 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -8
timeout 150 .cudatest/device --test-threads=2 > /tmp/device.log 2>&1; echo "device rc $?"; grep -E "^test result|FAILED|panicked" /tmp/device.log | head -8
echo "== (b) overhead-bound workloads ($SECONDS s)"
O=matmul_softmax_100_f32,pointwise_chain64_1024_f32
timeout 60 $B bench --backend cuda --workload $O --json $OUT/o-default.json 2>&1 | grep -E "^(matmul|pointwise)|k0_|k1_" | head -8
timeout 60 $B bench --backend cuda --mode reduce-overhead --workload $O --no-calibrate --json $OUT/o-ro.json 2>&1 | grep -E "^(matmul|pointwise)" | head -4
SINTER_LOG=compile timeout 60 $B profile --backend cuda --workload matmul_softmax_100_f32 --out /tmp/prof 2>&1 | tail -4; python3 - <<'PY'
import json
p = json.load(open('/tmp/prof/profile.json'))
for k in p.get('kernels', []):
    st = k.get('stats') or {}
    print('profile', k.get('name'), k.get('strategy'), 'median us', round(st.get('median_ns', 0) / 1e3, 2), 'regs', k.get('registers'), 'grid', k.get('grid'), 'block', k.get('block'))
PY
timeout 120 python3 .bench/torch_anchor.py --only $O --modes eager,default,reduce-overhead --out $OUT/o-torch.json 2>&1 | grep -E "^(matmul|pointwise)"
timeout 120 python3 scripts/torch_per_call.py 2>&1 | grep "per call"
echo "== (c) max-autotune after L2 clears ($SECONDS s)"
M=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,attention_b8h16s1024d64_bf16
timeout 100 $B bench --backend cuda --workload $M --no-calibrate --json $OUT/m-default.json 2>&1 | grep -E "^[a-z]" | head -8
SINTER_LOG=autotune timeout 200 $B bench --backend cuda --mode max-autotune --workload $M --no-calibrate --json $OUT/m-tuned.json > $OUT/m-tuned.log 2>&1; echo "max-autotune rc $?"
grep -E "^[a-z_0-9]+ +max-autotune" $OUT/m-tuned.log | head -8
grep -iE "chose|winner|best" $OUT/m-tuned.log | cut -c1-220 | head -20
timeout 150 python3 .bench/torch_anchor.py --only $M --modes default --out $OUT/m-torch.json 2>&1 | grep -E "^[a-z]"
python3 .bench/compare.py $OUT/m-torch.json $OUT/m-default.json $OUT/m-tuned.json 2>&1 | tail -9
python3 .bench/compare.py $OUT/o-torch.json $OUT/o-default.json $OUT/o-ro.json 2>&1 | tail -4
cp /tmp/suite.log /tmp/device.log $OUT/ 2>/dev/null
echo "== done ($SECONDS s)"
