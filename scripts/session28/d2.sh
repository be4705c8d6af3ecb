#!/usr/bin/env bash
# Session 28, device call 2: why ViT-B/16's bf16 attention kernel takes 0.99 s in NVRTC (GPT-2's
# 0.51): the kernels of both (SINTER_DEBUG) and NVRTC's phases on their attention sources
# (`--fdevice-time-trace`, cache off); ResNet-50's cold compile (f32, bf16) at light-source
# groups of 1, 2, 4 and 8 (SINTER_NVRTC_GROUP) with NVRTC's cache bypassed.
source scripts/device_env.sh
tar xJf .pack/srcs.tar.xz -C /tmp
export INC=/usr/local/cuda/include LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
zoo_export gpt2,vit_b_16,resnet50
for m in gpt2 vit_b_16; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m /tmp/dbg_$m; SINTER_CACHE_DIR=/tmp/sc_m SINTER_DEBUG=/tmp/dbg_$m timeout 90 $B bench --backend cuda --model $f $ins --precision bf16 --iters 3 --warmup 1 --no-calibrate 2>&1 | grep -E "^model" | cut -c1-140
  (cd /tmp/dbg_$m && tar cJf $OUT/kernels_$m.tar.xz $(find . -name "*.cu") )
  for a in $(find /tmp/dbg_$m -name "*attention*.cu" | head -2); do
    head -4 $a | cut -c1-300
    CUDA_CACHE_DISABLE=1 R=2 X1=--fdevice-time-trace=/tmp/tt_$m.json /tmp/srcs/nvrtc_one $a
    python3 scripts/session28/nvrtc_phases.py /tmp/tt_$m.json.json
  done
done
echo "== ResNet-50 cold compile by light-source group ($SECONDS s)"
m=resnet50; f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
for p in f32 bf16; do for g in 8 1 2 4 8; do
  rm -rf /tmp/sc_m; SINTER_NVRTC_GROUP=$g SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $B bench --backend cuda --model $f $ins --precision $p --iters 3 --warmup 1 --no-calibrate > /tmp/m.log 2>&1
  echo "$p group $g: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs') | $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-120)"
done; done
echo "== done ($SECONDS s)"
