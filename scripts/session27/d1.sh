#!/usr/bin/env bash
# Session 27, device call 1: (a) GPT-2 small and BERT-base (f32, 8 x 128 tokens) through WGSL over
# NVIDIA's Vulkan driver: graph breaks and CPU-reference runs (SINTER_LOG=graph_breaks), the
# process wall, `bench --model`'s device and wall time per run, `profile --model`'s kernels;
# (b) the WGSL attention workloads: the fused defaults against the three-kernel path;
# (c) add_relu_mul: sinter's kernel and torch.compile's under ncu.
source scripts/device_env.sh
zoo_export gpt2,bert
export SINTER_REQUIRE_GPU=1
for m in gpt2 bert; do
  d=/tmp/zoo/$m; ins=""; bins=""; for i in $d/input_*.npy; do ins="$ins -i $i"; bins="$bins --input $i"; done
  for be in wgsl cuda; do
    echo "== (a) $m $be run ($SECONDS s)"
    s=$SECONDS
    SINTER_CACHE_DIR=/tmp/sc_$be SINTER_LOG=graph_breaks timeout 150 $B run $d/legacy/model.onnx $ins --backend $be > /tmp/r.log 2>&1
    echo "rc $? wall $((SECONDS-s)) s"
    sed 's/\x1b\[[0-9;]*m//g' /tmp/r.log | grep -vE "^out:|^  " | grep -iE "break|cpu|segment|per run|first run|serves|compiled for|WARN|error" | cut -c1-220 | sort | uniq -c | head -20
    echo "== (a) $m $be bench ($SECONDS s)"
    SINTER_CACHE_DIR=/tmp/sc_$be timeout 150 $B bench --backend $be --model $d/legacy/model.onnx $bins --no-calibrate --json $OUT/bench_${m}_$be.json 2>&1 | grep -vE "^\s*$" | tail -4 | cut -c1-200
  done
  echo "== (a) $m wgsl profile ($SECONDS s)"
  SINTER_CACHE_DIR=/tmp/sc_wgsl timeout 200 $B profile --backend wgsl --model $d/legacy/model.onnx $bins --iters 3 --out /tmp/pw_$m > /tmp/pw_$m.log 2>&1; echo "rc $?"
  tail -3 /tmp/pw_$m.log | cut -c1-200
  python3 scripts/profile_top.py /tmp/pw_$m/profile.json 12 2>&1 | head -14
  python3 - /tmp/pw_$m/profile.json <<'PY' 2>&1 | head -12
import json, sys, collections
p = json.load(open(sys.argv[1]))
print("top-level keys:", sorted(p.keys()))
for k in ("graph_breaks", "segments", "runs", "spans"):
    v = p.get(k)
    if v: print(k, str(v)[:600])
PY
done
echo "== (b) WGSL attention ($SECONDS s)"
for w in attention_b8h16s1024d64_bf16 attention_causal_b8h16s2048d128_bf16; do
  timeout 100 $B bench --backend wgsl --workload $w --no-calibrate 2>&1 | grep -E "^$w" | cut -c1-140 | sed "s/^/fused /"
  SINTER_WGSL_BF16_AS_F16=1 timeout 100 $B bench --backend wgsl --workload $w --no-calibrate 2>&1 | grep -E "^$w" | cut -c1-140 | sed "s/^/coop-f16 /"
done
unset SINTER_REQUIRE_GPU
echo "== (c) add_relu_mul under ncu ($SECONDS s)"
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
timeout 90 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 4 --launch-count 2 --metrics $M \
  $B bench --backend cuda --workload add_relu_mul_10M_f32 --iters 6 --warmup 2 --no-calibrate 2>&1 | grep -E "^  [a-zA-Z_0-9]|  (gpu|dram|launch|sm)__" | cut -c1-110
cat > /tmp/arm.py <<'PY'
import torch
x = torch.randn(10_000_000, device="cuda"); b = torch.randn_like(x)
f = torch.compile(lambda x, b: torch.relu(x + b) * 2.0)
for _ in range(6): f(x, b)
torch.cuda.synchronize()
PY
timeout 150 ncu --cache-control all --clock-control none -k regex:triton --launch-skip 3 --launch-count 2 --metrics $M python3 /tmp/arm.py 2>&1 | grep -E "^  [a-zA-Z_0-9]|  (gpu|dram|launch|sm)__" | cut -c1-110
ls /tmp/torchinductor_root 2>/dev/null | head -2; find /tmp/torchinductor_root -name "*.py" 2>/dev/null | xargs grep -l "relu\|maximum" 2>/dev/null | head -1 | xargs -r sed -n '/@triton.jit/,$p' | head -40
echo "== done ($SECONDS s)"
