#!/usr/bin/env bash
# Session 16's validation of v16 (kseek.h ABI 3: attention_chunk in the kernel; kernels/NOTES.md "v16").
# One device call per mode, each ending before TOTAL_S (default 540 s) so its bundle comes back:
#   check   hopper + optest check-only (v16 changed every attention kernel), the GPU tests of the API (the
#           chunk cases, one per path), the fa3api grid and the serving grid (check), then the fa3api grid
#           timed (per call and graph) and serving rows s08/s09 against FA3
#   bench   bench26 against FA3, per call and graph (no-regression check against v15's runs 081456/082156)
#   ab      v16 against v15 itself on bench26 rows (alternating graph rounds, one process): v15's source copied
#           into the git-ignored .v15/ here (kernels/fa3_hopper, kseek.h, naive_core.cuh of commit 842b1f4) and
#           prebuilt as .v15/kernels/fa3_hopper/fa3_hopper.cu; carry .v15 too. ROWS picks the rows (default 1-3,7,9,12,14,17,18,20)
#   all     ab, check and bench in one call
# The build prebuilt here into .kseek-cache; carry .whl .kseek-cache .fa3:
#   KSEEK_GIT_REV=<sha> bash tools/gpu_v16.sh check|bench
# FA3's own forward tests: tools/gpu_fa3api.sh (SKIP_GRID=1), carry .fa3tests too.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
OUT=${OUT:-/tmp/v16_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
ev=(python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs")
echo "mode $mode" | tee -a "$OUT/device.txt"
do_ab() {
  log "ab v16 vs v15"; timeout -k 5 "$(cap 150)" "${ev[@]}" --grid bench26 --baseline .v15/kernels/fa3_hopper/fa3_hopper.cu \
    --scenarios "${ROWS:-1-3,7,9,12,14,17,18,20}" --graph --graph-rounds 4 > "$OUT/ab.txt" 2>&1; tail -16 "$OUT/ab.txt"
}
do_check() {
  log "hopper check"; timeout -k 5 "$(cap 100)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
  log "optest check"; timeout -k 5 "$(cap 60)" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
  log "GPU tests"; timeout -k 5 "$(cap 170)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_attention_api_gpu.py \
    tests/gpu/test_fa3api_gpu.py tests/gpu/test_serving_gpu.py > "$OUT/gputests.txt" 2>&1; tail -3 "$OUT/gputests.txt"
  log "fa3api grid"; timeout -k 5 "$(cap 120)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
    > "$OUT/grid.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid.txt"
  log "serving s08/s09"; timeout -k 5 "$(cap 90)" python3 tools/serving_bench.py --out "$OUT/serving" --rows '^s0[89]' \
    --budget "${BUDGET_S:-0.3}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
  cat "$OUT/serving/serving.txt" 2>/dev/null || tail -5 "$OUT/serving.log"
}
do_bench() {
  log "bench26 vs fa3"; timeout -k 5 "$(cap 500)" "${ev[@]}" --grid bench26 --baseline fa3 --graph \
    > "$OUT/bench26.txt" 2>&1; grep -E '^ +[0-9]+ r|^correct' "$OUT/bench26.txt" | cut -c1-150
}
case $mode in
  ab) do_ab ;;
  check) do_check ;;
  bench) do_bench ;;
  all) do_ab; do_check; do_bench ;;
  final)   # correctness (grids and the API's GPU tests) and bench26 against FA3, in one short call
    log "hopper check"; timeout -k 5 "$(cap 100)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
    log "optest check"; timeout -k 5 "$(cap 60)" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
    log "GPU tests"; timeout -k 5 "$(cap 100)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_attention_api_gpu.py \
      tests/gpu/test_fa3api_gpu.py tests/gpu/test_serving_gpu.py > "$OUT/gputests.txt" 2>&1; tail -2 "$OUT/gputests.txt"
    do_bench ;;
  *) echo "unknown mode $mode (ab, check, bench, all, final)"; exit 2 ;;
esac
log done
