#!/usr/bin/env bash
# Session 12, device call 4: call 3's build plus library plans shared per shape on a stream,
# constants hashed in parallel, the dynamic attempt comparing kernel by kernel, zoo_check's sinter
# runs on every CPU. Everything also goes to $OUT/log. CUDA suite and device tests; zoo_check beside
# torch (cold compile and per-run time in the same call; OMP_WAIT_POLICY=PASSIVE so torch's
# OpenMP threads do not spin beside sinter's compile), each sinter compile broken down; then per
# model a cold compile (empty cache) and a warm start (program cache hit) in fresh processes; the
# memory-bound workloads' cold and warm compiles (sinter bench).
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
SINTER_CACHE_DIR=/tmp/sc timeout 150 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head -8
SINTER_CACHE_DIR=/tmp/sc timeout 100 .cudatest/device 2>&1 | grep -E "test result|FAILED|panicked" | head -8
MODELS=resnet18,resnet50,convnext_tiny,efficientnet_b0,vit_b_16,bert,gpt2
OMP_WAIT_POLICY=PASSIVE SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/sc_zoo PYTHONUNBUFFERED=1 timeout 330 python3 onnx/models/zoo_check.py \
  --bin "$BIN" --models $MODELS --work /tmp/zoo --keep --exporters legacy --batch 8 --base --iters 10 2>&1 | tail -40 | cut -c1-330
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx
  ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  rm -rf /tmp/c1
  for run in cold warm; do
    SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 60 $BIN run $f $ins --backend cuda --out /tmp/o.npz 2>&1 \
      | grep -E "compiled in|cuda load|: compile" | sed -e "s/^.*sinter::compile[^ ]* //" -e "s/^/$m $run: /" | cut -c1-330
  done
done
for w in add_relu_mul_10M_f32 cos_16M_f32 cos_cos_16M_f32 softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32; do
  rm -rf /tmp/c2
  SINTER_CACHE_DIR=/tmp/c2 timeout 60 $BIN bench --workload $w --backend cuda --json /tmp/b_$w.json --no-calibrate > /dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open('/tmp/b_$w.json')); r=d['results'][0] if 'results' in d else d; print('$w', {k: v for k, v in (r.items() if isinstance(r, dict) else []) if 'compile' in k or k.endswith('_s')})" 2>&1 | cut -c1-300
done
