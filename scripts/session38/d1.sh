#!/usr/bin/env bash
# Session 38, device call 1: `exp` and `erf` in PTX on the hardware's ex2.approx (ptx/math.rs).
# Their error over all 2^32 inputs against f64 (`.pack/mathcheck`, the module of math.rs's
# `test_module`), correctness (the shared suite, `device`, `device_dynamic`, every reduced workload
# `--check`, the ONNX node suite), then runs and cold compiles old (session start) / new, fresh
# processes with every cache off, and torch.compile's cold compiles in the same call.
source scripts/device_env.sh
echo "== exp and erf, every input ($SECONDS s)"
timeout 150 .pack/mathcheck $OUT/math.ptx 2>&1 | tail -6
echo "== correctness ($SECONDS s)"
for t in suite device device_dynamic; do
  timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/$t: /"
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' > $OUT/reduced.txt
grep -vc "check ok" $OUT/reduced.txt | sed 's/^/lines without check ok (the header): /'
grep -E "^(softmax|layernorm|matmul_softmax)" $OUT/reduced.txt | cut -c1-160
echo "== run and cold, old / new ($SECONDS s)"
W=softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16
for r in 1 2 3; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 200 $b bench --backend cuda --workload $W --no-calibrate --json $OUT/$v$r.json 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8}'
  done
done
echo "== the ONNX node suite through CUDA ($SECONDS s)"
suite=$(mktemp -d)
python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1; echo "suite rc $? ($SECONDS s)"
SINTER_CACHE_DIR=/tmp/sc_conf timeout 300 $B conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -2
echo "== torch ($SECONDS s)"
timeout 300 python3 .bench/torch_anchor.py --modes eager,default --only softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32 --out $OUT/torch.json 2>&1 | tail -2
python3 .bench/compare.py $OUT/torch.json $OUT/new3.json 2>&1 | tail -8
echo "== done ($SECONDS s)"
