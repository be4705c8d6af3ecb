#!/usr/bin/env bash
# Session 24, device call 2 (issue 13): cuBLASLt's residual epilogue (C, beta 1) and products
# whose output rows are not 16-byte aligned split into an aligned scratch. (a) the device tests of
# both, the shared suite (all; its products again under SINTER_CUDA_LIBRARY=force); (b) cuBLASLt
# on GPT-2's LM head shape with D's rows dense (61044 bytes apart) and aligned (`:pad`); (c) GPT-2
# small and ViT-B/16 before (aca0268, `.bench/sinter_old`) and after, alternating in one call.
source scripts/device_env.sh
echo "== (a) tests ($SECONDS s)"
timeout 240 .cudatest/device library_residuals tensor_core_and_library --test-threads 1 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "^test |test result|panicked" /tmp/dev.log | head -8
SINTER_CUDA_LIBRARY=force timeout 150 .cudatest/suite matmul --test-threads 2 > /tmp/suitef.log 2>&1; echo "suite (forced library) rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suitef.log | head -6
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
echo "== (b) gemm_algos ($SECONDS s)"
S="1024x30522x768:bt 1024x30522x768:bt:pad 256x30522x768:bt 256x30522x768:bt:pad 64x30522x768:bt 64x30522x768:bt:pad"
timeout 60 .bench/gemm_algos bf16 $S --algos 4 --reps 20
timeout 90 .bench/gemm_algos f32 1024x30522x768:bt 1024x30522x768:bt:pad 256x30522x768:bt 256x30522x768:bt:pad --algos 4 --reps 10
echo "== (c) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 200 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|vit)" | cut -c1-200
for m in gpt2 vit_b_16; do for p in bf16 f32; do for r in 1 2; do for bin in old new; do ab_bench $m $p $bin; done; done; done; done
echo "== (d) profiles ($SECONDS s)"
f=/tmp/zoo/gpt2/legacy/model.onnx; ins=$(for i in /tmp/zoo/gpt2/input_*.npy; do echo -n "--input $i "; done)
for p in bf16 f32; do
  timeout 60 $B profile --backend cuda --model $f $ins --precision $p --out /tmp/pg_$p > /dev/null 2>&1; echo "gpt2 $p profile rc $?"
  python3 scripts/profile_kinds.py /tmp/pg_$p/profile.json 0; cp /tmp/pg_$p/profile.json $OUT/gpt2_$p.json
done
timeout 60 $B profile --backend cuda --model /tmp/zoo/vit_b_16/legacy/model.onnx --dim batch=8 --out /tmp/pv > /dev/null 2>&1
python3 scripts/profile_kinds.py /tmp/pv/profile.json 10
echo "== done ($SECONDS s)"
