#!/usr/bin/env bash
# Session 29, device call 6: ConvNeXt-Tiny bf16's kernels (SINTER_DEBUG) and what NVRTC takes for
# each light source alone (cache off, one at a time): which sources make its units of eight take
# 1.5-1.9 s. ViT-B/16 bf16's kernels come back too.
source scripts/device_env.sh
export INC=/usr/local/cuda/include LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
gcc -O2 scripts/session28/nvrtc_one.c -o /tmp/nvrtc_one -ldl 2>/dev/null
zoo_export convnext_tiny,vit_b_16
for m in convnext_tiny vit_b_16; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  rm -rf /tmp/sc_m /tmp/dbg_$m; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_m SINTER_DEBUG=/tmp/dbg_$m timeout 90 $B bench --backend cuda --model $f $ins --precision bf16 --iters 3 --warmup 1 --no-calibrate 2>&1 | grep -E "^model" | cut -c1-120
  (cd /tmp/dbg_$m && tar cJf $OUT/kernels_$m.tar.xz $(find . -name "*.cu") )
done
echo "== ConvNeXt bf16 sources alone, NVRTC cache off ($SECONDS s)"
for a in $(python3 scripts/session28/distinct.py /tmp/dbg_convnext_tiny); do
  case "$(head -c 2000 $a)" in *mma*) continue;; esac
  echo "$(wc -c < $a) $(CUDA_CACHE_DISABLE=1 R=1 X1=--no-cache /tmp/nvrtc_one $a 2>&1 | tail -1 | sed 's|/tmp/dbg_convnext_tiny/||')"
done | sort -k5 -n -r | head -40
echo "== done ($SECONDS s)"
