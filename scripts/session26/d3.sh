#!/usr/bin/env bash
# Session 26, device call 3 (issue 13, 12): (a) where a warm start (program cache hit) of GPT-2,
# BERT, ViT-B/16 and ResNet-50 goes (SINTER_LOG=compile), bf16 and f32; (b) the same models
# through WGSL over NVIDIA's Vulkan driver (f32, against torch's CPU output) and the attention
# workloads through WGSL: the portability figures issues 12 and 13 ask for.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
source scripts/device_env.sh
echo "== (a) exports ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,bert,vit_b_16,resnet50 --base --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|bert|vit_b_16|resnet50) .*dynamic" | cut -c1-160
echo "== (a) warm starts ($SECONDS s)"
for m in gpt2 bert vit_b_16 resnet50; do
  d=/tmp/zoo/$m; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for p in bf16 f32; do
    for run in cold warm; do
      SINTER_CACHE_DIR=/tmp/sw_$p SINTER_LOG=compile timeout 120 $B run $d/legacy/model.onnx $ins --backend cuda --precision $p > /tmp/r.log 2>&1
      echo "$m $p $run: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -E 'compiled in [0-9.]+ s:|cuda load' | cut -c17-330 | tr '\n' ' ')"
    done
  done
done
echo "== (b) WGSL over Vulkan ($SECONDS s)"
export SINTER_REQUIRE_GPU=1
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_wgsl timeout 240 python3 onnx/models/zoo_check.py \
  --bin "$B" --backend wgsl --models gpt2,bert,vit_b_16,resnet50 --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing --iters 5 2>&1 | grep -E "^(gpt2|bert|vit_b_16|resnet50) .*dynamic" | cut -c1-160
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16 attention_decode_b32h32kv4096d128_bf16; do
  for be in wgsl cuda; do
    timeout 100 $B bench --backend $be --workload $w --no-calibrate 2>&1 | grep -E "^$w" | cut -c1-140 | sed "s/^/$be /"
  done
done
echo "== done ($SECONDS s)"
