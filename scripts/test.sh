#!/usr/bin/env bash
# sinter's test command (README): on a fresh Debian machine it installs what the tests need
# (Mesa's lavapipe Vulkan driver for the WGSL backend, Xvfb for viewer screenshots, the onnx
# Python package for the conformance suite, NVRTC, ptxas and the CUDA headers from PyPI to compile the
# CUDA backend's kernels), then runs formatting, clippy, every test, and the
# ONNX conformance suite against the committed floor.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

step "install system packages"
missing=()
for p in mesa-vulkan-drivers libvulkan1 xvfb; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
python3 -c "import onnx" 2>/dev/null || python3 -m pip install -q "onnx==1.23.2" numpy
# NVRTC and the CUDA headers from PyPI (no GPU here: the CUDA backend's kernels are compiled, not
# run). The CUDA 13 wheels all install into site-packages/nvidia/cu13/{lib,include}.
cuda_wheels() {
  python3 - <<'PY'
import os, site, sys
for d in [site.getusersitepackages(), *site.getsitepackages(), *sys.path]:
    root = os.path.join(d, "nvidia", "cu13")
    need = ("lib/libnvrtc.so.13", "include/cuda_fp16.h", "include/crt/host_defines.h", "bin/ptxas")
    if all(os.path.isfile(os.path.join(root, f)) for f in need):
        print(root)
        break
PY
}
CUDA_WHEELS="$(cuda_wheels)"
if [ -z "$CUDA_WHEELS" ]; then
  python3 -m pip install -q "nvidia-cuda-nvrtc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*" \
    "nvidia-cuda-nvcc==13.0.*"
  CUDA_WHEELS="$(cuda_wheels)"
fi
[ -n "$CUDA_WHEELS" ] || { echo "NVRTC wheels installed but nvidia/cu13 not found in site-packages" >&2; exit 1; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc -D warnings (every intra-doc link resolves)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "cargo test"
# The WGSL tests run on lavapipe; they must not silently skip here.
export SINTER_REQUIRE_GPU=1 SINTER_ADAPTER="${SINTER_ADAPTER:-cpu}"
# Every generated CUDA kernel is compiled with NVRTC (backend-cuda/tests/nvrtc.rs); it must not skip.
export LD_LIBRARY_PATH="$CUDA_WHEELS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SINTER_CUDA_INCLUDE="$CUDA_WHEELS/include" SINTER_REQUIRE_NVRTC=1
# Every PTX module the renderer writes (`render::ptx`) is assembled with the nvcc wheel's ptxas.
export SINTER_PTXAS="$CUDA_WHEELS/bin/ptxas"
# Property tests explore a fixed sequence of cases in CI (override to explore others locally).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-1}"
export SINTER_CACHE_DIR="${SINTER_CACHE_DIR:-$(mktemp -d)}"
cargo test --workspace --locked

if [ -x scripts/conformance.sh ]; then
  step "ONNX conformance (floor in onnx/conformance-floor.json)"
  # The debug binary built by `cargo test` above (no second, release build of every dependency).
  SINTER_BIN="${SINTER_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/sinter}" scripts/conformance.sh
  step "ONNX conformance on WGSL (lavapipe)"
  SINTER_BIN="${SINTER_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/sinter}" SINTER_CONFORMANCE_BACKEND=wgsl scripts/conformance.sh
fi
step "done"
