# Sourced at the top of the device scripts (`scripts/session*/d*.sh`, run through the device
# tool from the repository root with the carried `.pack` and `.gl`): strict mode, the log in
# $OUT/log, the packed binaries unpacked, the environment every call sets (CUDA and NVRTC
# required, NVRTC's headers from the toolkit, a private cache), `B` the CLI, and the device
# named first.
set -uo pipefail
mkdir -p "$OUT"; exec > >(tee "$OUT/log") 2>&1
tar xJf .pack/bins.tar.xz
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1 SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
