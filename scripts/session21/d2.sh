#!/usr/bin/env bash
# Session 21, device call 2: (a) issue 11's ResNet-18 beside torch.compile in the same call
# (default and max-autotune); (b) every variant max-autotune times for the decode attention,
# sum_64M and the d64 attention (SINTER_LOG=autotune), to see what the defaults leave.
source scripts/device_env.sh
echo "== (a) resnet18_b32_f32 ($SECONDS s)"
timeout 150 $B bench --backend cuda --workload resnet18_b32_f32 --json $OUT/r18.json 2>&1 | grep -E "^resnet|default|autotune" | head -4
timeout 200 $B bench --backend cuda --mode max-autotune --workload resnet18_b32_f32 --no-calibrate --json $OUT/r18-ma.json 2>&1 | grep -E "^resnet" | head -3
timeout 150 python3 .bench/torch_anchor.py --only resnet18_b32_f32 --modes eager,default --out $OUT/torch-r18.json 2>&1 | tail -3
echo "== (b) max-autotune variants ($SECONDS s)"
for w in attention_decode_b32h32kv4096d128_bf16 sum_64M_f32 attention_b8h16s1024d64_bf16; do
  SINTER_LOG=autotune timeout 150 $B bench --backend cuda --mode max-autotune --workload $w --no-calibrate 2>&1 | grep -vE "^\s*$" | cut -c1-200 | tail -40
done
echo "== done ($SECONDS s)"
