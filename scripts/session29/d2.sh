#!/usr/bin/env bash
# Session 29, device call 2: the CUDA-core tile's one-step reduction through cp.async
# (`matmul_softmax_100_f32`): the suite and the matmul device tests, then HEAD (old) against the
# change (new), alternating, each a fresh process with every compiler cache off: cold compile and
# run time in default and reduce-overhead modes. Also the host's CPUs (NVRTC is CPU-bound).
source scripts/device_env.sh
lscpu | grep -E 'Model name|^CPU\(s\)|MHz|Thread|Core'; cat /sys/fs/cgroup/cpu.max 2>/dev/null; nproc
echo "== tests ($SECONDS s)"
for t in suite device_matmul device; do echo "-- $t: $(timeout 200 .cudatest/$t 2>&1 | grep -E '^test result|FAILED|panicked' | head -5)"; done
echo "== matmul_softmax_100_f32 old/new ($SECONDS s)"
for r in 1 2 3; do for v in old new; do b=$B; [ $v = old ] && b=$OLD
  for mode in default reduce-overhead; do
    rm -rf /tmp/sc_$v; echo "$v $mode: $(CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 60 $b bench --backend cuda --workload matmul_softmax_100_f32 --mode $mode --iters 200 --warmup 50 --no-calibrate 2>&1 | grep -E '^matmul' | tr -s ' ' | cut -c1-150)"
  done
done; done
echo "== done ($SECONDS s)"
