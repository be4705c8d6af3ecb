#!/usr/bin/env bash
# Session 23, device call 6 (issue 13): products stored in their permute's order
# (`consumer_order`). (a) the CUDA shared suite (its new `permuted_product_projection`); (b) GPT-2
# small in bf16 before (`.bench/sinter_old`, 1e08c67) and after, alternating in one call, as call 4.
source scripts/device_env.sh
echo "== (a) suite ($SECONDS s)"
timeout 150 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"; grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) gpt2 ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 100 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 5 2>&1 | grep -E "^gpt2" | cut -c1-160
for r in 1 2; do for bin in old new; do ab_bench gpt2 bf16 $bin; done; done
echo "== done ($SECONDS s)"
