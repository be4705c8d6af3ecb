#!/usr/bin/env bash
# Session 38, device calls 4-8 and 10-12: the commands run directly through the device tool (the
# record of what ran; each call began with `source scripts/device_env.sh`). Calls 4-8 chased
# device_dynamic's illegal address, calls 10-12 ran memcheck over the other device tests.
source scripts/device_env.sh
CS=/usr/local/cuda/bin/compute-sanitizer
case "${1:-}" in
4)  for i in 1 2; do timeout 100 .cudatest/device_dynamic; done
    timeout 100 .cudatest/device_dynamic --test-threads=1
    SINTER_PTX=0 timeout 100 .cudatest/device_dynamic ;;
5)  for i in 1 2; do export SINTER_CACHE_DIR=/tmp/fresh_$i; rm -rf $SINTER_CACHE_DIR
      timeout 100 .cudatest/suite; timeout 100 .cudatest/device; timeout 100 .cudatest/device_dynamic; done
    SINTER_CACHE_DIR=/tmp/fresh_3 timeout 100 .cudatest/device_dynamic ;;
6)  for i in 1 2 3 4; do SINTER_CACHE_DIR=/tmp/cold_$i CUDA_CACHE_DISABLE=1 timeout 100 .cudatest/device_dynamic; done ;;
7)  SINTER_CACHE_DIR=/tmp/san1 timeout 200 $CS --tool memcheck --print-limit 4 .cudatest/device_dynamic --test-threads=1
    SINTER_CACHE_DIR=/tmp/san2 SINTER_PTX=0 timeout 150 $CS --tool memcheck --print-limit 4 .cudatest/device_dynamic --test-threads=1 ;;
8)  SINTER_CACHE_DIR=/tmp/san3 timeout 150 $CS --tool memcheck --print-limit 1 --show-backtrace device .cudatest/device_dynamic convolutions_and_library --test-threads=1 ;;
10|11) SINTER_CACHE_DIR=/tmp/m2 timeout 230 $CS --tool memcheck --print-limit 2 .cudatest/device --test-threads=4
    SINTER_CACHE_DIR=/tmp/m4 timeout 200 $CS --tool memcheck --print-limit 3 .cudatest/suite ;;
12) for t in device_implicit device_fp8; do SINTER_CACHE_DIR=/tmp/m5 timeout 150 $CS --tool memcheck --print-limit 2 .cudatest/$t; done ;;
*)  echo "usage: adhoc.sh CALL (4-8, 10-12)" ;;
esac
