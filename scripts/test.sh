#!/usr/bin/env bash
# sinter's test command (README): on a fresh Debian machine it installs what the tests need
# (Mesa's lavapipe Vulkan driver for the WGSL backend, Xvfb for viewer screenshots, the onnx
# Python package for the conformance suite), then runs formatting, clippy, every test, and the
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

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
# The WGSL tests run on lavapipe; they must not silently skip here.
export SINTER_REQUIRE_GPU=1 SINTER_ADAPTER="${SINTER_ADAPTER:-cpu}"
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
