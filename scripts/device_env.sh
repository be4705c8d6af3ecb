# Sourced at the top of the device scripts (`scripts/session*/d*.sh`, run through the device
# tool from the repository root with the carried `.pack` and `.gl`): strict mode, the log in
# $OUT/log, the packed binaries unpacked, the environment every call sets (CUDA and NVRTC
# required, NVRTC's headers from the toolkit, a private cache), `B` the CLI, `OLD` the previous
# build (`.bench/sinter_old`) and `ab_bench`, and the device named first.
set -uo pipefail
mkdir -p "$OUT"; exec > >(tee "$OUT/log") 2>&1
# Vulkan for WGSL on the GPU, where the loader's packages are carried (`.gl/*.deb`): unpacked,
# and NVIDIA's ICD named.
if compgen -G ".gl/*.deb" > /dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
tar xJf .pack/bins.tar.xz
export XDG_RUNTIME_DIR=/tmp SINTER_CACHE_DIR=/tmp/sc SINTER_CUDA_INCLUDE=/usr/local/cuda/include PYTHONUNBUFFERED=1 SINTER_REQUIRE_CUDA=1 SINTER_REQUIRE_NVRTC=1
B=$PWD/.bench/sinter
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
OLD=$PWD/.bench/sinter_old
# `ab_bench MODEL PRECISION old|new`: one `bench --model` line of the zoo's export of MODEL
# (its saved inputs) with the current build ($B) or the previous one ($OLD), each with its own
# program cache: the before/after pairs the scripts alternate in one call.
ab_bench() {
  local f=/tmp/zoo/$1/legacy/model.onnx b=$B; [ "$3" = old ] && b=$OLD
  local ins=$(for i in /tmp/zoo/$1/input_*.npy; do echo -n "--input $i "; done)
  echo -n "$1 $2 $3: "; SINTER_CACHE_DIR=/tmp/sc_$3 timeout 60 $b bench --backend cuda --model $f $ins --precision $2 --no-calibrate 2>&1 | grep -vE "^#|^\s*$|^workload" | head -1 | cut -c1-150
}
# `zoo_export MODELS`: exports MODELS (comma-separated, e.g. gpt2,vit_b_16) at batch 8, base size,
# legacy exporter, into /tmp/zoo (kept, with saved inputs), checks sinter against torch once, and
# prints each model's PASS line: what `ab_bench` and the scripts' own loops then read.
zoo_export() {
  echo "== exports of $1 ($SECONDS s)"
  OMP_WAIT_POLICY=PASSIVE SINTER_CACHE_DIR=/tmp/sc_zoo timeout 240 python3 onnx/models/zoo_check.py \
    --bin "$B" --models "$1" --base --work /tmp/zoo --keep --exporters legacy --batch 8 \
    --no-torch-timing --iters 3 2>&1 | grep -E "^[a-z0-9_]+ +legacy +PASS" | cut -c1-100
}
# `ab_cold ROUNDS WORKLOADS [bench args...]`: the old/new cold-compile loop of the scripts since
# session 37, shared: ROUNDS rounds of `old` then `new`, each a fresh process with its program
# cache emptied and the driver's JIT cache off, printing `round version workload ms RUN cold S`
# per workload and writing $OUT/{old,new}ROUND.json.
ab_cold() {
  local rounds=$1 w=$2; shift 2
  for r in $(seq 1 "$rounds"); do
    for v in old new; do
      local b=$B; [ $v = old ] && b=$OLD
      rm -rf /tmp/sc_$v
      CUDA_CACHE_DISABLE=1 SINTER_CACHE_DIR=/tmp/sc_$v timeout 300 $b bench --backend cuda --workload "$w" --no-calibrate --json $OUT/$v$r.json "$@" 2>&1 \
        | grep -E "^[a-z]" | grep -v "^workload" | awk -v r=$r -v v=$v '{print r" "v" "$1" ms "$4" cold "$8}'
    done
  done
}
