#!/usr/bin/env bash
# Session 13, device call 3. (1) issue 10: where a single-workload cold compile goes, with the CUDA
# load's full breakdown (setup, executable, other), each workload its own fresh process after one
# process that absorbs the machine's first-touch costs. (2) issue 13: GPT-2 small, f32, beside
# torch.compile in the same call; then max-autotune with every candidate logged, to see whether
# the heuristic's first cuBLASLt algorithm leaves time on the table for the large f32 products.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
echo "== the machine's first sinter process (absorbs first-touch costs)"
SINTER_LOG=compile $B bench --backend cuda --no-calibrate --workload add_relu_mul_10M_f32 --iters 3 --warmup 1 2>&1 | grep -E "cuda load" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-400
echo "== cold compiles, each its own process"
for rep in 1 2 3; do for w in cos_16M_f32 add_relu_mul_10M_f32 softmax_8192x8192_f32; do
  SINTER_LOG=compile $B bench --backend cuda --no-calibrate --workload $w --iters 3 --warmup 1 --json /tmp/c.json > /tmp/c.log 2>&1
  echo "$w rep $rep: cold $(python3 -c "import json; print(json.load(open('/tmp/c.json'))['results'][0]['cold_compile_s'])")"
  grep -E "cuda load" /tmp/c.log | head -1 | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-400
  grep -E "compiled in" /tmp/c.log | head -1 | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300
done; done
echo "== GPT-2 small f32 beside torch.compile"
PYTHONUNBUFFERED=1 timeout 200 python3 onnx/models/zoo_check.py --bin $B --models gpt2 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --base --iters 10 > $OUT/zoo.log 2>&1; echo "zoo rc $?"
grep -E "^gpt2 " $OUT/zoo.log | tail -2
d=/tmp/zoo/gpt2; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
echo "== GPT-2 default vs max-autotune (sinter bench --model)"
timeout 100 $B bench --backend cuda --model $d/legacy/model.onnx $ins --iters 20 --json $OUT/g-default.json 2>&1 | tail -3
SINTER_LOG=autotune timeout 300 $B bench --backend cuda --mode max-autotune --model $d/legacy/model.onnx $ins --iters 20 \
  --json $OUT/g-at.json > $OUT/g-at.log 2>&1; echo "rc $?"; tail -3 $OUT/g-at.log
grep -iE "gemm|cublas|library" $OUT/g-at.log | sed 's/\x1b\[[0-9;]*m//g' | head -60 | cut -c1-300
echo "== profile, default"
timeout 60 $B profile --backend cuda --model $d/legacy/model.onnx $ins --out /tmp/p_gpt2 > /dev/null 2>&1
python3 scripts/session9/top.py /tmp/p_gpt2 12 2>&1 | tail -14
