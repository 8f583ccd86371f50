#!/usr/bin/env bash
# Issue 26 on the H200, in ONE call (expected 150-300 s; never run yet): the serving grid
# (kernelseek/grids/serving.yaml: mixed chunked-prefill + decode steps over paged caches), each row checked
# against an fp32 computation and timed per call AND in CUDA-graph replay against the native baselines that
# compute the same call (FA3 always, FlashInfer and FA4 where staged), then the GPU tests of the serving host
# path (tests/gpu/test_serving_gpu.py: no host sync, capturable).
#
#   here, once:  bash tools/gpu_serving.sh prepare
#       pyelftools into .whl/, the kernel prebuilt into .kseek-cache/, FA3 into .fa3/ (tools/fa3.sh prepare);
#       all git-ignored. Prints their sizes (the carry must stay under 64 MiB beside the repository).
#   GPU (carry .whl .kseek-cache .fa3):  KSEEK_GIT_REV=$(git rev-parse HEAD) bash tools/gpu_serving.sh
#       writes $OUT/serving.json (meta: GPU, driver, clocks, torch, git revision, kernel hash, each baseline's
#       version or why it is unavailable; per row: checks, paths, times, speedups, bound fractions),
#       $OUT/serving.txt (the table, printed last), $OUT/device.txt, $OUT/gputests.txt.
# FlashInfer is a baseline only when it was staged on the same warm machine first (two calls before this one:
# `bash tools/gpu_peers.sh stage1` carrying .whl .fa3 .fi-a, then `stage2` carrying .whl .fi-b .fi-c); this
# script never compiles a FlashInfer module (KSEEK_FLASHINFER_JIT=0: a row whose module is not built says so).
# FA4 likewise when staged (tools/gpu_peers.sh fa4a/fa4b/fa4c). Knobs: ROWS (regex), BUDGET_S (0.4 s of
# per-call timing per implementation and row), REPLAYS (20), SKIP_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-run}" = prepare ]; then
  set -e
  mkdir -p .whl
  ls .whl/pyelftools-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: -d .whl pyelftools==0.33
  KSEEK_CACHE_DIR=$PWD/.kseek-cache PYTHONPATH=$PWD python3 -m kernelseek build kernels/fa3_hopper > /dev/null
  bash tools/fa3.sh prepare
  du -sh .whl .kseek-cache .fa3
  exit 0
fi

export KSEEK_CACHE_DIR=${KSEEK_CACHE_DIR:-$PWD/.kseek-cache} KSEEK_FLASHINFER_JIT=0
export KSEEK_GIT_REV=${KSEEK_GIT_REV:-unknown}
source tools/site.sh
OUT=${OUT:-/tmp/serving_out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
echo "git $KSEEK_GIT_REV" | tee -a "$OUT/device.txt"
python3 -c "import kernelseek.attention_core as c; c._lib(); print('kernel ready')" 2>&1 | tail -1

echo "== serving grid ($(($(date +%s)-T0)) s)"
timeout 380 python3 tools/serving_bench.py --out "$OUT" --rows "${ROWS:-}" --budget "${BUDGET_S:-0.4}" \
  --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
echo "serving_bench exit $? ($(($(date +%s)-T0)) s)"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  left=$(( 500 - ($(date +%s) - T0) ))
  [ "$left" -gt 30 ] && timeout "$left" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_serving_gpu.py \
    > "$OUT/gputests.txt" 2>&1
  tail -3 "$OUT/gputests.txt"
fi
echo "== done in $(($(date +%s)-T0)) s"
grep -v '^{' "$OUT/serving.log" | tail -5
cat "$OUT/serving.txt" 2>/dev/null || tail -20 "$OUT/serving.log"
