#!/usr/bin/env bash
# Session 28, device call 5: (a) why threads of one process compile slower than processes: the
# distinct kernel sources of ViT-B/16 bf16 (19), GPT-2 small bf16 (8) and ResNet-50 f32 (25) on 16
# threads, 16 processes, and 16 threads with glibc's allocator told to keep freed memory
# (GLIBC_TUNABLES; mmap/munmap take the address space's lock), cache off; (b) ViT-B/16 and GPT-2
# bf16 with the short-sequence attention default (new) against HEAD (old), alternating: run time
# and `bench`'s cold compile (NVRTC's cache bypassed).
source scripts/device_env.sh
tar xJf .pack/srcs.tar.xz -C /tmp
export INC=/usr/local/cuda/include LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} CUDA_CACHE_DISABLE=1
T1=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
for m in vit_b_16 gpt2 resnet50; do
  D=$(ls /tmp/srcs/k3/$m/*.cu)
  echo "== $m: $(echo $D | wc -w) sources ($SECONDS s)"
  [ $m = vit_b_16 ] && /tmp/srcs/nvrtc_par thread 1 $D
  for r in 1 2; do
    /tmp/srcs/nvrtc_par thread 16 $D; /tmp/srcs/nvrtc_par proc 16 $D
    echo -n "tunables: "; GLIBC_TUNABLES=$T1 /tmp/srcs/nvrtc_par thread 16 $D
    echo -n "tunables+hugetlb: "; GLIBC_TUNABLES=$T1:glibc.malloc.hugetlb=1 /tmp/srcs/nvrtc_par thread 16 $D
  done
  JOBS=1 /tmp/srcs/nvrtc_par thread 16 $D | sort -k4 -rn | head -3
done
unset CUDA_CACHE_DISABLE
zoo_export gpt2,vit_b_16
for m in vit_b_16 gpt2; do for r in 1 2; do for v in old new; do
  rm -rf /tmp/sc_$v; ab_bench $m bf16 $v
done; done; done
echo "== done ($SECONDS s)"
