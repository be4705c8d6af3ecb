#!/usr/bin/env bash
# Session 13, device call 2. (1) issue 12: one-warpgroup wgmma tiles over 64 keys at head dim 64
# (more blocks per SM) and the overlapped schedule in two stages (K and V rings offset by one
# tile), checked and timed beside the defaults. (2) issue 13: why a cold compile
# started from zoo_check.py ran NVRTC slower than one from a shell: GPT-2 small cold three ways
# (from zoo_check, from a shell, from a Python process that ran torch on the CPU first), each
# through tsinter.py (affinity, environment, user/sys seconds, context switches) with
# SINTER_LOG=compile.
set -uo pipefail
mkdir -p $OUT; exec > >(tee $OUT/log) 2>&1
export SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1 XDG_RUNTIME_DIR=/tmp SINTER_CUDA_INCLUDE=/usr/local/cuda/include
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null; python3 -c "import os; print('affinity', len(os.sched_getaffinity(0)))"
t=.cudatest/device_attention
echo "== correctness: wgmma 64x64 one warpgroup"
SINTER_TEST_TUNINGS="wgmma 64x64 wg1 s,wgmma-ov 64x128 wg1 s2,wgmma-ov 64x64 wg1 s2,wgmma-ov 128x128 wg2 s2" timeout 200 $t --test-threads=1 --nocapture attention_matches >$OUT/check.log 2>&1; echo "rc $?"
grep -cE " ok$" $OUT/check.log; grep -E "FAILED|panicked|^test result" $OUT/check.log | head -10
echo "== timing"
SINTER_TEST_TUNINGS="wgmma 64x,wgmma-ov,wgmma-tma 128x128 wg2+1 s3" timeout 240 $t --ignored --nocapture --test-threads=1 attention_timing >$OUT/timing.log 2>&1; echo "rc $?"
grep TFLOP $OUT/timing.log | awk '{a[NR]=$0} END {for (i = NR / 2 + 1; i <= NR; i++) print a[i]}' | grep "s1024 d64\|causal"
echo "== gpt2 cold compile, three ways"
export SINTER_BIN=$PWD/.bench/sinter TSINTER_LOG=$OUT/tsinter.log SINTER_LOG=compile
W=$PWD/scripts/session13/tsinter.py
SINTER_CACHE_DIR=/tmp/sc1 PYTHONUNBUFFERED=1 timeout 200 python3 onnx/models/zoo_check.py --bin $W --models gpt2 --work /tmp/zoo --keep \
  --exporters legacy --batch 8 --base --iters 10 --no-torch-timing > $OUT/zoo.log 2>&1; echo "zoo rc $?"
grep -E "^gpt2 |compiled in|cuda load|NVRTC" $OUT/zoo.log | head -12
d=/tmp/zoo/gpt2; ins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; done
echo "-- from a shell"
SINTER_CACHE_DIR=/tmp/sc2 $W run $d/legacy/model.onnx $ins --backend cuda --out /tmp/o2.npz 2>&1 | grep -E "compiled in|cuda load|per run|compile " | head -8
echo "-- from python after torch on the CPU"
SINTER_CACHE_DIR=/tmp/sc3 python3 - "$W" $d/legacy/model.onnx $ins <<'EOF2' 2>&1 | grep -E "compiled in|cuda load|per run|compile |torch" | head -10
import sys, subprocess, torch, time
x = torch.randn(2048, 2048)
t = time.perf_counter()
for _ in range(20): y = x @ x
print(f"torch cpu matmuls {time.perf_counter() - t:.2f} s, threads {torch.get_num_threads()}")
w, model, *rest = sys.argv[1:]
subprocess.run([w, "run", model, *rest, "--backend", "cuda", "--out", "/tmp/o3.npz"])
EOF2
echo "-- tsinter log"; cat $OUT/tsinter.log
echo "== single-workload cold compiles (issue 10), each its own fresh process; NVRTC warm-up off / on"
unset SINTER_BIN TSINTER_LOG
for rep in 1 2; do for wu in 0 1; do for w in cos_16M_f32 add_relu_mul_10M_f32 softmax_8192x8192_f32; do
  SINTER_NVRTC_WARMUP=$wu SINTER_LOG=compile timeout 60 .bench/sinter bench --backend cuda --no-calibrate --workload $w \
    --iters 3 --warmup 1 --json $OUT/cold-$w-$wu-$rep.json > $OUT/cold-$w-$wu-$rep.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print(sys.argv[2], 'warm-up', sys.argv[3], 'cold', r.get('cold_compile_s'), 'warm', r.get('warm_compile_s'))" $OUT/cold-$w-$wu-$rep.json $w $wu
  grep -E "cuda load|warm-up" $OUT/cold-$w-$wu-$rep.log | head -2 | cut -c1-220
done; done; done
TORCHINDUCTOR_CACHE_DIR=/tmp/ind_fresh TRITON_CACHE_DIR=/tmp/tri_fresh PYTHONUNBUFFERED=1 timeout 200 python3 .bench/torch_anchor.py --modes default \
  --only cos_16M_f32,add_relu_mul_10M_f32,softmax_8192x8192_f32 --out $OUT/torch-cold.json > $OUT/torch-cold.log 2>&1; echo "rc $?"
python3 -c "import json; [print('torch', r['name'], r['mode'], 'cold_compile_s', r.get('cold_compile_s')) for r in json.load(open('$OUT/torch-cold.json'))['results']]"
