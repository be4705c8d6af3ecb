#!/usr/bin/env bash
# ONNX backend conformance check for CI.
#
# 1. installs the pinned onnx Python package if it is missing,
# 2. generates the ONNX backend test suite into a temporary folder,
# 3. runs `sinter conformance` on it (CPU reference by default) and fails when any suite kind
#    passes fewer cases than the floor committed in onnx/conformance-floor.json.
#
# Environment: SINTER_BIN (a prebuilt sinter binary; default: build target/release/sinter),
# SINTER_CONFORMANCE_BACKEND (default cpu), SINTER_CONFORMANCE_JSON (keep the JSON report here),
# ONNX_VERSION (the pinned onnx version the floor was measured with).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
backend="${SINTER_CONFORMANCE_BACKEND:-cpu}"
onnx_version="${ONNX_VERSION:-1.23.2}"
py="${PYTHON:-python3}"

if ! "$py" -c 'import onnx, numpy' 2>/dev/null; then
    echo "conformance: installing onnx==$onnx_version"
    "$py" -m pip install --quiet "onnx==$onnx_version" numpy
fi
have="$("$py" -c 'import onnx; print(onnx.__version__)')"
if [ "$have" != "$onnx_version" ]; then
    echo "conformance: warning: onnx $have installed, the floor was measured with $onnx_version" >&2
fi

if [ -n "${SINTER_BIN:-}" ]; then
    bin="$SINTER_BIN"
else
    (cd "$root" && cargo build --release -p sinter --quiet)
    bin="$root/target/release/sinter"
fi

suite="$(mktemp -d)"
trap 'rm -rf "$suite"' EXIT
start=$(date +%s)
"$py" "$root/onnx/conformance/make_onnx_suite.py" "$suite"
json="${SINTER_CONFORMANCE_JSON:-$suite/report.json}"
"$bin" conformance "$suite" --backend "$backend" --json "$json" --floor "$root/onnx/conformance-floor.json"
echo "conformance: suite generated and run in $(( $(date +%s) - start )) s"
