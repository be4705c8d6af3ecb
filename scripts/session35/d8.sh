#!/usr/bin/env bash
# Session 35, device call 8: is call 7's torch SDPA d64 sustained figure (0.1013-0.1083 ms) the
# kernel's, or Python's launch loop? SDPA launched and replayed from a CUDA graph, with the host's
# time per call; sinter's `--sustain 2` again beside it (and in reduce-overhead: its CUDA graph),
# alternating twice.
source scripts/device_env.sh
for r in 1 2; do
  timeout 60 python3 scripts/session35/torch_sustained.py 2 --graph | sed "s/^/$r torch /"
  for m in default reduce-overhead; do
    SINTER_CACHE_DIR=/tmp/sc_a timeout 60 $B bench --backend cuda --workload attention_b8h16s1024d64_bf16 --mode $m --no-calibrate --sustain 2 2>&1 | grep -E "^attention|sustained" | sed "s/^/$r sinter $m /" | cut -c1-160
  done
done
echo "== done ($SECONDS s)"
