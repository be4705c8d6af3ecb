#!/usr/bin/env bash
# Session 20, device call 5 (issue 13): why the zoo harness's first runs compile 2-3x slower than
# the same runs from a shell (calls 1-4). ConvNeXt-Tiny (40 NVRTC programs) exported by the zoo
# (its own first run broken down), then alternately: from the shell, as the child of a Python that
# imported torch, and of one holding a CUDA context; every run with an empty cache. Load and the
# busiest processes between steps.
source scripts/device_env.sh
load() { echo "   [$SECONDS s] load $(cut -d' ' -f1-3 /proc/loadavg); top: $(top -bn1 -o %CPU | sed -n 8,10p | awk '{print $12"="$9"%"}' | tr '\n' ' ')"; }
load
echo "== (a) zoo, export and first run ($SECONDS s)"
OMP_WAIT_POLICY=PASSIVE SINTER_LOG=compile SINTER_CACHE_DIR=/tmp/z1 timeout 150 python3 onnx/models/zoo_check.py \
  --bin "$B" --models convnext_tiny --work /tmp/zoo --keep --exporters legacy --batch 8 \
  --no-torch-timing 2>&1 | grep -E "legacy +dynamic|compiled in|cuda load" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330
load
d=/tmp/zoo/convnext_tiny; f=$d/legacy/model.onnx; ins=$(ls $d/input_*.npy)
for rep in 1 2 3; do
  echo "== rep $rep: shell ($SECONDS s)"
  rm -rf /tmp/c_sh; SINTER_CACHE_DIR=/tmp/c_sh SINTER_LOG=compile /usr/bin/time -f "   shell wall %e s, user %U, sys %S, vol cs %w, invol cs %c" \
    $B run $f $(for i in $ins; do echo -n "-i $i "; done) --backend cuda --out /tmp/o.npz 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "compiled in|cuda load|shell wall" | grep -v "^#" | sed 's/^.*sinter::compile: /   /' | cut -c1-300
  echo "== rep $rep: child of python+torch ($SECONDS s)"
  timeout 120 python3 scripts/session20/child.py $B $f $ins
  echo "== rep $rep: child of python+torch holding a CUDA context ($SECONDS s)"
  timeout 120 python3 scripts/session20/child.py $B $f $ins --cuda
  load
done
echo "== done ($SECONDS s)"
