#!/usr/bin/env bash
# Session 26, device call 1 (issue 13): where a machine's first cold compile goes, and the CUDA
# warm-up (`backend-cuda/src/warmup.rs`: the first NVRTC compile and cuBLASLt's load on a thread
# of their own from the backend's creation). (a) the machine's first sinter processes (vit_tiny
# bf16, empty cache); (b) the same with the CUDA libraries, headers and the binary dropped from
# the page cache before each run (`evict.py`), old (a749bb9) and new alternating; (c) GPT-2 small
# and ViT-B/16 in the zoo beside torch.compile (f32 and bf16 autocast), then their bf16 cold
# compiles evicted and not, old and new; (d) the suite and the device tests.
source scripts/device_env.sh
R="python3 scripts/session26/rusage.py"; E=scripts/session26/evict.py
SITE=$(python3 -c "import nvidia,os;print(list(nvidia.__path__)[0])" 2>/dev/null)
EV="$(readlink -f /usr/local/cuda) $SITE /usr/lib/x86_64-linux-gnu $PWD/.bench"
echo "evict set: $EV"; uptime
cold() { # LABEL BIN MODEL-ARGS...: a cold compile (empty cache) under rusage
  local l=$1 b=$2; shift 2; rm -rf /tmp/c1
  SINTER_CACHE_DIR=/tmp/c1 SINTER_LOG=compile,cuda timeout 120 $R "$l" $b run "$@" --backend cuda --out /tmp/o.npz
}
VT="onnx/models/vit_tiny/model.onnx -i onnx/models/vit_tiny/test_data_set_0/input_0.pb --precision bf16"
echo "== (a) the machine's first sinter processes ($SECONDS s)"
cold "vit_tiny new first" $B $VT
cold "vit_tiny new 2nd" $B $VT
cold "vit_tiny old 3rd" $OLD $VT
echo "== (b) evicted before each ($SECONDS s)"
for rep in 1 2; do
  for v in old new; do b=$B; [ $v = old ] && b=$OLD
    python3 $E $EV; cold "vit_tiny $v evicted $rep" $b $VT
  done
done
echo "== (c) models ($SECONDS s)"
python3 $E $EV
OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo SINTER_LOG=compile timeout 330 python3 onnx/models/zoo_check.py \
  --bin "$B" --models gpt2,vit_b_16 --base --work /tmp/zoo --keep --exporters legacy --batch 8 --bf16 \
  --iters 20 2>&1 | grep -E "^(gpt2|vit_b_16) |compiled in|cuda load" | grep -v "done in" | cut -c1-330
for m in gpt2 vit_b_16; do
  d=/tmp/zoo/$m; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
  for rep in 1 2; do
    for v in old new; do b=$B; [ $v = old ] && b=$OLD
      python3 $E $EV; cold "$m bf16 $v evicted $rep" $b $d/legacy/model.onnx $ins --precision bf16
    done
  done
  cold "$m bf16 new warm-files" $B $d/legacy/model.onnx $ins --precision bf16
  cold "$m bf16 old warm-files" $OLD $d/legacy/model.onnx $ins --precision bf16
done
echo "== (d) tests ($SECONDS s)"
timeout 200 .cudatest/suite --test-threads 2 > /tmp/suite.log 2>&1; echo "suite rc $?"
grep -E "^test result|FAILED|panicked" /tmp/suite.log | head -6
timeout 150 .cudatest/device --test-threads 2 > /tmp/dev.log 2>&1; echo "device rc $?"
grep -E "test result|panicked" -A2 /tmp/dev.log | cut -c1-600 | head -8
echo "== done ($SECONDS s)"
