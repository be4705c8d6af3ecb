#!/usr/bin/env bash
# Session 12, device call 2: NVRTC's scaling over threads on this host; the CUDA suite and device
# tests on the grouped-NVRTC build; each model's cold compile (empty cache, operating system's
# caches warm) with every source alone (SINTER_NVRTC_GROUP=1) and grouped (default 8, and 16);
# then zoo_check beside torch (cold compile and per-run time, same call).
set -uo pipefail
BIN=$PWD/.bench/sinter
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
cat /sys/fs/cgroup/cpu.max 2>/dev/null
timeout 60 python3 scripts/session12/nvrtc_scaling.py /usr/local/cuda/lib64/libnvrtc.so /usr/local/cuda/include
SINTER_CACHE_DIR=/tmp/sc timeout 150 .cudatest/suite --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked" | head -8
SINTER_CACHE_DIR=/tmp/sc timeout 100 .cudatest/device 2>&1 | grep -E "test result|FAILED|panicked" | head -8
MODELS=resnet18,resnet50,convnext_tiny,efficientnet_b0,vit_b_16,bert,gpt2
PYTHONUNBUFFERED=1 timeout 200 python3 onnx/models/zoo_check.py --bin "$BIN" --models $MODELS \
  --work /tmp/zoo --keep --exporters legacy --batch 8 --base --no-torch-timing 2>&1 | grep -E "PASS|FAIL" | cut -c1-100
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m; f=$d/legacy/model.onnx
  ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for g in 1 8 16; do
    rm -rf /tmp/c1
    SINTER_NVRTC_GROUP=$g SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 60 $BIN run $f $ins --backend cuda --out /tmp/o.npz 2>&1 \
      | grep -E "cuda load|: compile" | sed -e "s/^.*sinter::compile[^ ]* //" -e "s/^/$m g$g: /" | cut -c1-330
  done
done
