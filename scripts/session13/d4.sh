#!/usr/bin/env bash
# Session 13, device call 4 (issues 10, 13): libcublasLt loaded only where a library product is
# wanted, and then on a thread beside the memory upload. The CUDA suite and device tests; cold
# compiles of the issue-10 workloads (one process, and each in its own) beside torch.compile's with
# empty caches and the per-run figures of both; GPT-2 small's cold compile from a shell.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
echo "== the machine's first sinter process (absorbs first-touch costs)"
SINTER_LOG=compile $B bench --backend cuda --no-calibrate --workload add_relu_mul_10M_f32 --iters 3 --warmup 1 2>&1 | grep -E "cuda load" | sed 's/\x1b\[[0-9;]*m//g' | head -1 | cut -c1-400
echo "== CUDA suite and device tests"
timeout 150 .cudatest/suite --test-threads 1 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "test result|FAILED|panicked" /tmp/suite.log | head -8
timeout 150 .cudatest/device --test-threads 1 > /tmp/device.log 2>&1; echo "device rc $?"; grep -E "test result|FAILED|panicked" /tmp/device.log | head -8
timeout 100 .cudatest/device_implicit --test-threads 1 > /tmp/impl.log 2>&1; echo "implicit rc $?"; grep -E "test result|FAILED|panicked" /tmp/impl.log | head -4
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,sum_64M_f32,pointwise_chain64_1024_f32,matmul_softmax_100_f32
echo "== cold compiles, each workload its own process"
for rep in 1 2; do for w in cos_16M_f32 add_relu_mul_10M_f32 softmax_8192x8192_f32 matmul_softmax_100_f32; do
  SINTER_LOG=compile $B bench --backend cuda --no-calibrate --workload $w --iters 3 --warmup 1 --json /tmp/c.json > /tmp/c.log 2>&1
  echo "$w rep $rep: cold $(python3 -c "import json; print(json.load(open('/tmp/c.json'))['results'][0]['cold_compile_s'])")"
  grep -E "cuda load" /tmp/c.log | head -1 | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-400
done; done
echo "== sinter bench, issue 10's workloads in one process, and torch in the same call (empty inductor/Triton caches)"
$B calibrate --backend cuda --no-matmul 2>&1 | tail -3
$B bench --backend cuda --no-calibrate --workload $W --json $OUT/sinter.json 2>&1 | tail -12
TORCHINDUCTOR_CACHE_DIR=/tmp/ind_fresh TRITON_CACHE_DIR=/tmp/tri_fresh PYTHONUNBUFFERED=1 timeout 240 python3 .bench/torch_anchor.py \
  --modes eager,default --only $W --out $OUT/torch.json > $OUT/torch.log 2>&1; echo "torch rc $?"
python3 .bench/compare.py $OUT/torch.json $OUT/sinter.json 2>&1 | tee $OUT/compare.txt
python3 -c "import json; [print('torch', r['name'], r['mode'], 'ms', round(r['ms'],4), 'cold_compile_s', round(r.get('cold_compile_s') or 0,3)) for r in json.load(open('$OUT/torch.json'))['results']]"
echo "== GPT-2 small cold compile from a shell"
PYTHONUNBUFFERED=1 timeout 200 python3 onnx/models/zoo_check.py --bin $B --models gpt2 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --base --iters 10 --no-torch-timing > /tmp/zoo.log 2>&1; echo "zoo rc $?"
d=/tmp/zoo/gpt2; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
for rep in 1 2; do
  SINTER_CACHE_DIR=/tmp/scg$rep SINTER_LOG=compile $B run $d/legacy/model.onnx $ins --backend cuda --out /tmp/o.npz 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "cuda load|compiled in|per run" | cut -c1-420
done
