#!/usr/bin/env bash
# The paged prefill and mixed (decode + prefill) paths of kernels/fa3_hopper on the H200, in two calls
# (session 10; issues 25, 26, 27).
#   here, once:  bash tools/gpu_fa3api.sh prepare     (.whl with einops + pyelftools, .fa3tests, .fa3, and
#                                                      the kernel prebuilt into .kseek-cache)
#   GPU call A (carry .whl .kseek-cache .fa3):  KSEEK_GIT_REV=<sha> bash tools/gpu_paged.sh a   (~400 s)
#       build (a cache hit), optest check-only (every ABI feature, paged ones included), the production
#       grid against FA3 with graph timing (p06/p07: paged prefill), the serving grid
#       (tools/serving_bench.py: mixed steps over paged caches) and its GPU tests (no host sync).
#   GPU call B (carry .fa3tests .whl .kseek-cache .fa3):  KSEEK_GIT_REV=<sha> bash tools/gpu_paged.sh b   (~200 s)
#       the fa3api grid (tools/fa3api_grid.py), bench26 against FA3 (the dense paths did not regress),
#       FlashAttention-3's own forward tests (seeded sample, tools/gpu_fa3api.sh's runner, what time is left).
#   (mode c, the A/B of the removed KSEEK_FA3_PAGEIDS=smem, ran at aa20ca6: git show aa20ca6:tools/gpu_paged.sh)
#   GPU (carry .fa3tests too):  bash tools/gpu_paged.sh d    ncu on p05/p06, then FA3's forward tests
#   Build variants (A/B against the default, and their GPU tests): tools/gpu_variants.sh.
# Everything lands in $OUT/bundle.tgz; a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/paged_out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
export KSEEK_CACHE_DIR=${KSEEK_CACHE_DIR:-$PWD/.kseek-cache} KSEEK_FLASHINFER_JIT=0
export KSEEK_GIT_REV=${KSEEK_GIT_REV:-unknown}
source tools/site.sh
T0=$(date +%s)
log() { echo "=== $* (+$(( $(date +%s) - T0 )) s)"; }
ks() { python3 -m kernelseek "$@"; }
summ() { grep -E "geomean|correct|speedup|FAILED|failed|error" "$1" | tail -${2:-4}; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
echo "git $KSEEK_GIT_REV" | tee -a "$OUT/device.txt"
log "build"
ks build kernels/fa3_hopper > "$OUT/build.txt" 2>&1; tail -3 "$OUT/build.txt"

case "${1:-a}" in
a)
  log "optest (check only)"
  timeout 150 python3 -m kernelseek eval kernels/fa3_hopper --grid optest --check-only --no-progress \
    --runs-dir /tmp/paged_runs > "$OUT/optest.txt" 2>&1; echo "rc=$?"; summ "$OUT/optest.txt" 6
  log "production vs fa3 (graph)"
  timeout 170 python3 -m kernelseek eval kernels/fa3_hopper --grid production --baseline fa3 --graph --no-progress \
    --runs-dir /tmp/paged_runs > "$OUT/production.txt" 2>&1; echo "rc=$?"; summ "$OUT/production.txt" 6
  log "serving grid"
  mkdir -p "$OUT/serving"
  timeout 120 python3 tools/serving_bench.py --out "$OUT/serving" --budget 0.4 --replays 20 \
    > "$OUT/serving/serving.log" 2>&1; echo "rc=$?"
  log "serving GPU tests"
  timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_serving_gpu.py \
    > "$OUT/serving/gputests.txt" 2>&1; tail -2 "$OUT/serving/gputests.txt"
  log "tables"
  grep -E "^ *(row|p0|d1|[0-9])" "$OUT/production.txt" | tail -22
  cat "$OUT/serving/serving.txt" 2>/dev/null | tail -10
  ;;
b)
  log "fa3api grid"
  timeout 120 python3 tools/fa3api_grid.py --reps 20 --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1
  echo "rc=$?"
  log "bench26 vs fa3"
  timeout 170 python3 -m kernelseek eval kernels/fa3_hopper --grid bench26 --baseline fa3 --no-progress \
    --runs-dir /tmp/paged_runs > "$OUT/bench26.txt" 2>&1; echo "rc=$?"; summ "$OUT/bench26.txt" 6
  log "FA3's forward tests (seeded sample, tools/gpu_fa3api.sh)"
  left=$(( 560 - ($(date +%s) - T0) ))
  [ "$left" -gt 60 ] && [ "${SKIP_FA3TESTS:-0}" != 1 ] && OUT="$OUT/fa3tests" BUDGET_S=$left SKIP_GRID=1 bash tools/gpu_fa3api.sh \
    > "$OUT/fa3tests_call.log" 2>&1
  tail -16 "$OUT/fa3tests_call.log"
  log "tables"
  tail -21 "$OUT/grid.txt"
  ;;
d)  # Nsight Compute on p05 (contiguous) and p06 (page 16): what limits the paged prefill (NOTES v13c),
    # then FlashAttention-3's forward tests on this kernel (carry .fa3tests too)
  for page in 0 16; do
    log "ncu page=$page"
    timeout 60 python3 -m kernelseek profile --out "$OUT/prof_p$page" --kernel fwd_kernel --launch-skip 2 \
      --launch-count 1 -- python3 tools/one_paged_call.py $page 3 > "$OUT/prof_p$page.txt" 2>&1
    echo "rc=$?"; tail -40 "$OUT/prof_p$page.txt"
    tar czf "$BUNDLE_RET/bundle.tgz" -C "$OUT" . 2>/dev/null   # what is done so far, should the call be cut
  done
  left=$(( ${D_BUDGET_S:-170} - ($(date +%s) - T0) ))
  log "FA3 forward tests ($left s left)"
  [ "$left" -gt 60 ] && OUT="$OUT/fa3tests" BUDGET_S=$left FA3_DEADLINE_S=$(( left - 10 )) SKIP_GRID=1 \
    bash tools/gpu_fa3api.sh > "$OUT/fa3tests_call.log" 2>&1
  tail -14 "$OUT/fa3tests_call.log"
  ;;
esac
# only the run directories' tables come back (a whole run directory holds too many files for $OUT)
for d in /tmp/paged_runs/*/; do
  [ -f "$d/results.json" ] || continue
  mkdir -p "$OUT/runs/$(basename "$d")"; cp "$d"/meta.json "$d"/results.json "$OUT/runs/$(basename "$d")/"
done
log "done"
