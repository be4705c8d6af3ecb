#!/usr/bin/env bash
# Session 28, device call 3: the kernels of ViT-B/16 bf16, GPT-2 small bf16 and ResNet-50 f32
# (`sinter profile --out`, returned as tarballs); each distinct source's NVRTC time alone and
# inside a 16-thread batch, threads against processes (cache off); NVRTC's phases on the
# attention sources; ResNet-50 at light-source groups of 8, 16 and 64.
source scripts/device_env.sh
tar xJf .pack/srcs.tar.xz -C /tmp
export INC=/usr/local/cuda/include LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
zoo_export gpt2,vit_b_16,resnet50
for mp in vit_b_16:bf16 gpt2:bf16 resnet50:f32; do
  m=${mp%%:*}; p=${mp##*:}
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/p_$m; SINTER_CACHE_DIR=/tmp/sc_p timeout 120 $B profile --backend cuda --model $f $ins --precision $p --out /tmp/p_$m > /tmp/p.log 2>&1 || tail -3 /tmp/p.log
  (cd /tmp/p_$m && tar cJf $OUT/kernels_$m.tar.xz $(find . -name "*.cu"))
  D=$(python3 scripts/session28/distinct.py /tmp/p_$m)
  echo "== $m $p: $(echo $D | wc -w) distinct sources ($SECONDS s)"
  echo "-- 16 threads, each job's time"; CUDA_CACHE_DISABLE=1 JOBS=1 /tmp/srcs/nvrtc_par thread 16 $D | sed "s|/tmp/p_$m/||" | sort -t: -k2 -r | head -8
  CUDA_CACHE_DISABLE=1 /tmp/srcs/nvrtc_par thread 16 $D; CUDA_CACHE_DISABLE=1 /tmp/srcs/nvrtc_par proc 16 $D
  for a in $(echo $D | tr ' ' '\n' | grep attention | head -1); do
    echo "-- alone: $(sed -n 3p $a | cut -c1-250)"
    CUDA_CACHE_DISABLE=1 R=2 X1=--fdevice-time-trace=/tmp/tt_$m.json /tmp/srcs/nvrtc_one $a
    python3 scripts/session28/nvrtc_phases.py /tmp/tt_$m.json.json | head -9
  done
done
echo "== ResNet-50 f32 cold compile by light-source group ($SECONDS s)"
m=resnet50; f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
for g in 8 16 64 8 16 64; do
  rm -rf /tmp/sc_m; SINTER_NVRTC_GROUP=$g SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $B bench --backend cuda --model $f $ins --iters 3 --warmup 1 --no-calibrate > /tmp/m.log 2>&1
  echo "group $g: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/m.log | grep -E 'cuda load' | head -1 | grep -oE 'NVRTC [0-9.]+ s for [0-9]+ programs') | $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -c1-120)"
done
echo "== done ($SECONDS s)"
