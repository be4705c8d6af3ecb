#!/usr/bin/env bash
# Session 24, device call 3 (issue 13): split epilogues with their indices simplified over the
# lanes (a dense store is `lane` again and vectorizes; GPT-2's bf16 LM head cast stored one f32 at
# a time), the padded scratch of call 2 withdrawn. (a) the device tests (residuals, split
# epilogues, convolution library epilogues), the shared suite, its products and convolutions on
# the libraries; (b) four models before (aca0268) and after, alternating; (c) Nsight Compute on
# GPT-2 bf16's epilogue kernels (where the split GELU's 12 us go).
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/device library_residuals tensor_core_and_library --test-threads 1 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "^test |test result|panicked" /tmp/dev.log | head -8
timeout 200 .cudatest/device_implicit --test-threads 1 > /tmp/imp.log 2>&1; echo "device_implicit rc $?"
grep -E "test result|panicked" /tmp/imp.log | head -4
SINTER_CUDA_LIBRARY=force timeout 150 .cudatest/suite matmul conv --test-threads 2 > /tmp/suitef.log 2>&1; echo "suite (forced library) rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suitef.log | head -6
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16,resnet50,convnext_tiny --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|vit|resnet|convnext)" | grep -v "done in" | cut -c1-200
for m in gpt2 vit_b_16 resnet50 convnext_tiny; do for p in bf16 f32; do for r in 1 2; do for bin in old new; do ab_bench $m $p $bin; done; done; done; done
echo "== (c) ncu ($SECONDS s)"
f=/tmp/zoo/gpt2/legacy/model.onnx; ins=$(for i in /tmp/zoo/gpt2/input_*.npy; do echo -n "--input $i "; done)
which ncu nsys
SINTER_CACHE_DIR=/tmp/sc_new timeout 150 ncu -k regex:"epilogue|k86|sm90|gemm" --launch-count 12 --section SpeedOfLight \
  $B run $f $ins --backend cuda --precision bf16 2>&1 | grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Memory Throughput|DRAM Through|Compute \(SM\)" | head -80
echo "== done ($SECONDS s)"
