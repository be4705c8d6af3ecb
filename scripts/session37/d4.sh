#!/usr/bin/env bash
# Session 37, device call 4: exp/erf/bf16 softmax in PTX, grouped PTX modules loaded side by side.
# Correctness (suite/device/device_dynamic with PTX on and off, reduced workloads `--check`, the
# ONNX node suite), cold compiles and runs old/new in fresh processes with every cache off,
# ResNet-18 with PTX on/off (same binary), and the issue-10 table beside torch in one call.
source scripts/device_env.sh
echo "== correctness ($SECONDS s)"
for v in 1 0; do
  for t in suite device device_dynamic; do
    SINTER_PTX=$v timeout 150 .cudatest/$t 2>&1 | grep -E "test result|FAILED|panicked" | head -4 | sed "s/^/PTX=$v $t: /"
  done
done
SINTER_CACHE_DIR=/tmp/sc_chk timeout 200 $B bench --backend cuda --scale reduced --check --no-calibrate --iters 3 --warmup 1 2>&1 | grep -vE '^#|^\s*$' | grep -v "check ok" | cut -c1-150
suite=$(mktemp -d); python3 onnx/conformance/make_onnx_suite.py "$suite" >/dev/null 2>&1
SINTER_CACHE_DIR=/tmp/sc_conf timeout 300 $B conformance "$suite" --backend cuda --json "$OUT/conf-cuda.json" 2>&1 | tail -1
echo "== cold/run, old / new, fresh processes, every cache off ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,pointwise_chain64_1024_f32,sum_64M_f32,resnet18_b32_f32
for r in 1 2; do
  for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_$v; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 200 $b bench --backend cuda --workload $W --no-calibrate --json $OUT/$v$r.json 2>&1 | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8" warm "$9}'
  done
done
echo "== ResNet-18 PTX on/off, same binary ($SECONDS s)"
for r in 1 2; do for v in 1 0; do
  rm -rf /tmp/sc_r; SINTER_PTX=$v CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_r SINTER_LOG=compile timeout 100 $B bench --backend cuda --workload resnet18_b32_f32 --no-calibrate > /tmp/r.log 2>&1
  echo "$r PTX=$v $(grep -E '^resnet' /tmp/r.log | awk '{print "ms "$4" cold "$8}')"
  sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -oE "NVRTC [0-9.]+ s for [0-9]+ programs|[0-9]+ PTX modules; own modules [0-9.]+ s" | tr '\n' ' '; echo
done; done
SINTER_CACHE_DIR=/tmp/sc_p timeout 100 $B profile --backend cuda --workload resnet18_b32_f32 --out /tmp/prof_new > /dev/null 2>&1
SINTER_PTX=0 SINTER_CACHE_DIR=/tmp/sc_p0 timeout 100 $B profile --backend cuda --workload resnet18_b32_f32 --out /tmp/prof_off > /dev/null 2>&1
python3 - <<'PY'
import json, glob
def kernels(d):
    for f in glob.glob(d + "/**/profile.json", recursive=True):
        p = json.load(open(f))
        ks = p.get("kernels") or []
        return {k.get("name"): (round((k.get("stats") or {}).get("median_ns", 0) / 1e3, 2), k.get("strategy")) for k in ks}
    return {}
a, b = kernels("/tmp/prof_new"), kernels("/tmp/prof_off")
print("profile kernels:", len(a), len(b))
for n in a:
    if a[n][1] and "ptx" in str(a[n][1]):
        print(f"  {n:40s} ptx {a[n][0]}  c++ {b.get(n, (None,))[0]}  {a[n][1]}")
PY
echo "== torch ($SECONDS s)"
timeout 400 python3 .bench/torch_anchor.py --modes eager,default --only add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,pointwise_chain64_1024_f32,resnet18_b32_f32 --out $OUT/torch.json 2>&1 | tail -3
python3 .bench/compare.py $OUT/torch.json $OUT/new2.json 2>&1 | tail -16
echo "== done ($SECONDS s)"
