#!/usr/bin/env bash
# Session 32, device call 1. (1) The suite and device_attention's decode cases (every tuning) on
# the new build (one-query decode over heads for four blocks an SM: the decode template, 256
# threads, instead of the tensor-core tile). (2) attention_decode cold compile and run, old (HEAD
# b4d4280) / new, four rounds alternating, fresh processes, every cache off; max-autotune's pick.
# (2b) cuBLASLt's handle made beside the context's creation (new) against HEAD: matmul_4096_f32
# and mlp cold compiles, four rounds alternating.
# (3) Where the one-kernel workloads' cold compiles go (SINTER_LOG=compile, the whole load line).
# (4) Host time per run_device under nsys (the driver calls' share), if nsys is there.
source scripts/device_env.sh
echo "-- suite: $(timeout 100 .cudatest/suite 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- device_attention decode cases, every tuning: $(SINTER_TEST_CASES=decode timeout 150 .cudatest/device_attention 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"
echo "-- check reduced: $(SINTER_CACHE_DIR=/tmp/sc_r timeout 60 $B bench --backend cuda --workload attention_decode_b32h32kv4096d128_bf16,attention_b8h16s1024d64_bf16 --scale reduced --check --iters 2 --no-calibrate 2>&1 | grep -oE 'check [A-Za-z]+' | sort | uniq -c | tr '\n' ' ')"
D=attention_decode_b32h32kv4096d128_bf16
echo "== $D cold s / ms, old / new, four rounds ($SECONDS s)"
for r in 1 2 3 4; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=compile timeout 60 $b bench --backend cuda --workload $D --iters 50 --warmup 10 --no-calibrate > /tmp/w.log 2>&1
  echo "$v $(grep -E "^$D" /tmp/w.log | tr -s ' ' | cut -c1-150)"
  [ $r = 1 ] && sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -m1 -A3 'cuda load' | cut -c1-300
done; done
echo "== library workloads cold s, old / new, four rounds ($SECONDS s)"
for w in matmul_4096_f32 mlp_8192x4096x16384_bf16; do for r in 1 2 3 4; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=compile timeout 60 $b bench --backend cuda --workload $w --iters 10 --warmup 2 --no-calibrate > /tmp/w.log 2>&1
  echo "$w $v $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -d" " -f4,8) | $(sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -m1 'cuda load' | grep -oE 'NVRTC [0-9.]+ s|plans [0-9.]+ s|library [0-9.]+ s|other [0-9.]+ s' | tr '\n' ' ')"
done; done; done
echo "-- max-autotune new: $(SINTER_CACHE_DIR=/tmp/sc_m timeout 120 $B bench --backend cuda --mode max-autotune --workload $D --no-calibrate 2>&1 | grep -E "^$D|chose" | tr -s ' ' | cut -c1-200 | tr '\n' ' ')"
echo "== where the one-kernel cold compiles go (new, two rounds) ($SECONDS s)"
for w in cos_16M_f32 softmax_8192x8192_f32 layernorm_gelu_8192x4096_f32 matmul_softmax_100_f32; do for r in 1 2; do
  rm -rf /tmp/sc_w; CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_w SINTER_LOG=compile timeout 60 $B bench --backend cuda --workload $w --iters 10 --warmup 2 --no-calibrate > /tmp/w.log 2>&1
  echo "$w: $(grep -E "^$w" /tmp/w.log | tr -s ' ' | cut -c1-120)"
  sed 's/\x1b\[[0-9;]*m//g' /tmp/w.log | grep -E 'cuda load|compile|NVRTC|lower|schedule|passes' | head -8 | cut -c1-300
done; done
echo "== nsys ($SECONDS s): $(which nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null)"
NS=$(which nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NS" ]; then
  SINTER_CACHE_DIR=/tmp/sc_b timeout 120 $NS profile -t cuda,osrt -o /tmp/p --force-overwrite true $B bench --backend cuda --workload cos_16M_f32 --iters 20 --warmup 5 --no-calibrate 2>&1 | grep -E "^cos" | cut -c1-200
  timeout 60 $NS stats -r cuda_api_sum /tmp/p.nsys-rep 2>&1 | head -30
fi
echo "== done ($SECONDS s)"
