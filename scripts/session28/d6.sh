#!/usr/bin/env bash
# Session 28, device call 6: the CUDA suite and the device tests with the short-sequence attention
# default (`device_attention` now has ViT's 2 x 12 x 197 bf16 and a 256-key f16 head); then
# ViT-B/16 and GPT-2 small bf16 cold compiles, the commit before (old: the tile change only)
# against the overlapped load (new: NVRTC beside the memory, the program cache's store beside the
# load), alternating, NVRTC's cache bypassed, SINTER_LOG=compile.
source scripts/device_env.sh
echo "== tests ($SECONDS s)"
for t in suite device device_attention; do
  echo "-- $t: $(timeout 300 .cudatest/$t 2>&1 | grep -E '^test result|FAILED|panicked' | head -5 | tr '\n' ' ')"
done
zoo_export gpt2,vit_b_16
for m in vit_b_16 gpt2; do
  f=/tmp/zoo/$m/legacy/model.onnx; ins=$(for i in /tmp/zoo/$m/input_*.npy; do echo -n "--input $i "; done)
  for r in 1 2; do for v in old new; do
    b=$B; [ $v = old ] && b=$OLD
    rm -rf /tmp/sc_m; SINTER_CACHE_DIR=/tmp/sc_m SINTER_LOG=compile timeout 90 $b bench --backend cuda --model $f $ins --precision bf16 --iters 3 --warmup 1 --no-calibrate > /tmp/m.log 2>&1
    sed -i 's/\x1b\[[0-9;]*m//g' /tmp/m.log
    echo "$m $v: $(grep -E '^model' /tmp/m.log | tr -s ' ' | cut -d' ' -f5,9,10) | $(grep -m1 'compiled in' /tmp/m.log | grep -oE 'compiled in .*' | cut -c1-150)"
    echo "   $(grep -m1 'cuda load' /tmp/m.log | grep -oE 'cuda load .*' | cut -c1-420)"
  done; done
done
echo "== done ($SECONDS s)"
