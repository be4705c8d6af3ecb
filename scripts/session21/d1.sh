#!/usr/bin/env bash
# Session 21, device call 1 (HEAD as carried): (a) where the read-bound workloads lose to the
# read ceiling: torch.sum and torch.compile's sum over 64M f32 (sum_64M_f32's bytes), the kernels
# torch's SDPA and torch.compile launch for the decode attention (scripts/torch_reads.py);
# (b) sinter's kernels of sum_64M, layernorm_gelu and the decode attention: `sinter profile`
# per-kernel times, then ncu (duration, DRAM throughput, grid, registers, warps, stalls);
# (c) the whole table: `sinter bench --backend cuda` beside torch_anchor.py in the same call.
source scripts/device_env.sh
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct
echo "== (a) torch's read-bound kernels ($SECONDS s)"
(cd scripts && timeout 150 python3 torch_reads.py) 2>&1 | grep -v Warning
echo "== (b) sinter's kernels ($SECONDS s)"
for w in sum_64M_f32 layernorm_gelu_8192x4096_f32 attention_decode_b32h32kv4096d128_bf16; do
  timeout 60 $B profile --backend cuda --workload $w --out /tmp/p_$w > /tmp/p_$w.log 2>&1; echo "profile $w rc $?"
  python3 scripts/profile_top.py /tmp/p_$w/profile.json 6 2>&1 | head -12
  timeout 90 ncu --cache-control all --clock-control none -k regex:^k --launch-skip 6 --launch-count 3 --metrics $M \
    $B bench --backend cuda --workload $w --iters 8 --warmup 2 --no-calibrate 2>&1 | grep -E "^  [a-zA-Z_0-9]|  (gpu|dram|launch|sm|smsp)__" | cut -c1-110
done
echo "== (b') torch's sum and decode kernels under ncu ($SECONDS s)"
cat > /tmp/tk.py <<'PY'
import torch, torch.nn.functional as F
x = torch.randn(1 << 26, device="cuda")
for _ in range(3): x.sum()
q = torch.randn(32, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(32, 32, 4096, 128, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
for _ in range(3): F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
timeout 120 ncu --cache-control all --clock-control none -k regex:"reduce_kernel|[Ff]lash|fmha|[Aa]ttn|sdpa|[Ss]plit|cutlass|cudnn|gemv|gemm" --launch-count 8 --metrics $M \
  python3 /tmp/tk.py 2>&1 | grep -E "^  [a-zA-Z_0-9]|  (gpu|dram|launch|sm|smsp)__" | cut -c1-130 | head -90
echo "== (c) sinter bench beside torch_anchor.py ($SECONDS s)"
W=add_relu_mul_10M_f32,cos_16M_f32,cos_cos_16M_f32,matmul_softmax_100_f32,matmul_softmax_4096_bf16,softmax_8192x8192_f32,layernorm_gelu_8192x4096_f32,mlp_8192x4096x16384_bf16,matmul_8192_bf16,matmul_4096_f32,pointwise_chain64_1024_f32,attention_b8h16s1024d64_bf16,attention_causal_b8h16s2048d128_bf16,attention_decode_b32h32kv4096d128_bf16,matmul_8192_fp8e4m3,resnet18_b32_f32
timeout 200 $B bench --backend cuda --json $OUT/sinter-cuda.json 2>&1 | grep -vE "^\s*$" | tail -24
timeout 60 $B bench --backend cuda --mode reduce-overhead --workload pointwise_chain64_1024_f32,matmul_softmax_100_f32 --no-calibrate --json $OUT/sinter-cuda-ro.json 2>&1 | tail -3
timeout 240 python3 .bench/torch_anchor.py --only $W,sdpa_flash_b8h16s1024d64_bf16,sdpa_flash_causal_b8h16s2048d128_bf16,sdpa_decode_b32h32kv4096d128_bf16 --modes eager,default --out $OUT/torch.json 2>&1 | tail -30
python3 .bench/compare.py $OUT/torch.json $OUT/sinter-cuda.json 2>&1 | tee $OUT/compare.txt | tail -30
echo "== done ($SECONDS s)"
