#!/usr/bin/env bash
# Session 39, device calls 3 and 4 (run through the device tool from the repository root with
# `.pack` carried; call 2, `d2.sh`, ran out of time after its decode runs).
# Call 3: torch's cold compiles of the three attention workloads.
source scripts/device_env.sh >/dev/null 2>&1
timeout 200 python3 .bench/torch_anchor.py --modes default --only attention_decode_b32h32kv4096d128_bf16,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16 --out $OUT/torch.json 2>&1 | grep -vE "^\s*$" | cut -c1-140 | tail -8
# Call 4 (the same machine, warm): the decode workload's cold compile, old / new, two rounds.
ab_cold 2 attention_decode_b32h32kv4096d128_bf16 --iters 3 --warmup 1 2>&1 | tee -a $OUT/log
