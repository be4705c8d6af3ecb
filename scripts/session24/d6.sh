#!/usr/bin/env bash
# Session 24, device call 6 (issue 13): a bf16 product stored as f32 (autocast's logits) is one
# cuBLASLt call writing f32, no longer a bf16 scratch and a widening kernel. (a) the library device
# test, the suite's products on the library; (b) GPT-2 small bf16 before (aca0268) and after.
source scripts/device_env.sh
timeout 120 .cudatest/device library_residuals --test-threads 1 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "test result|panicked" -A3 /tmp/dev.log | head -6
SINTER_CUDA_LIBRARY=force timeout 100 .cudatest/suite matmul --test-threads 2 > /tmp/suitef.log 2>&1; echo "suite (forced library) rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suitef.log | head -4
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 120 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^gpt2" | grep -v "done in" | cut -c1-160
for r in 1 2; do for bin in old new; do ab_bench gpt2 bf16 $bin; done; done
echo "== done ($SECONDS s)"
