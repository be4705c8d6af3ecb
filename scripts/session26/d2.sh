#!/usr/bin/env bash
# Session 26, device call 2 (issue 13): ONNX import with raw data as slices of the file's buffer
# and initializers decoded on several threads (old = a749bb9, new alternating). (a) a fresh
# machine's first sinter process after 24 GB of memory were touched and freed (call 1's first
# process, without that, compiled 2x slower); (b) GPT-2, BERT, ViT-B/16 exported and checked
# against torch (zoo, no torch timing); (c) `sinter run` of each, old and new alternating, the
# progress lines' timestamps (import) and the process's wall time; (d) the committed models and
# torchvision's through `--backend cuda` against onnxruntime (device_check.sh's first part).
source scripts/device_env.sh
R="python3 scripts/session26/rusage.py"
uptime
echo "== (a) 24 GB touched and freed, then the machine's first sinter process ($SECONDS s)"
python3 -c "
import numpy as np, time
t = time.perf_counter()
for _ in range(3):
    a = np.ones(8 << 30, dtype=np.uint8); del a
print(f'touched 3 x 8 GB in {time.perf_counter() - t:.1f} s')"
VT="onnx/models/vit_tiny/model.onnx -i onnx/models/vit_tiny/test_data_set_0/input_0.pb --precision bf16"
for rep in 1 2; do rm -rf /tmp/c1
  SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile timeout 120 $R "vit_tiny new rep $rep" $B run $VT --backend cuda --out /tmp/o.npz
done
echo "== (b) models ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 300 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,bert,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --no-torch-timing --iters 3 2>&1 | grep -E "^(gpt2|bert|vit_b_16) " | grep -v "done in" | cut -c1-160
echo "== (c) sinter run, old and new ($SECONDS s)"
for m in gpt2 bert vit_b_16; do
  d=/tmp/zoo/$m; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  ls -la $d/legacy/model.onnx | awk '{print $5 " bytes"}'
  for rep in 1 2; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
    SINTER_CACHE_DIR=/tmp/sc_$v timeout 120 $b run $d/legacy/model.onnx $ins --backend cuda --precision bf16 > /tmp/r.log 2>&1
    s=$(date +%s.%N); SINTER_CACHE_DIR=/tmp/sc_$v timeout 120 $b run $d/legacy/model.onnx $ins --backend cuda --precision bf16 > /tmp/r.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$m $v rep $rep rc $rc wall $(python3 -c "print(f'{$e-$s:.3f}')") s: $(sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -E '^# \[' | sed -E 's/^# \[ *([0-9.]+) s\] /\1 /' | cut -c1-60 | tr '\n' '|')"
  done; done
done
echo "== (d) committed models through cuda against onnxruntime ($SECONDS s)"
PARTS=committed BACKENDS=cuda OUT=/tmp/dc timeout 240 onnx/models/device_check.sh $B 2>&1 | grep -E "PASS|FAIL|skip|error" | cut -c1-150 | head -60
echo "== done ($SECONDS s)"
