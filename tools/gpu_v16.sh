#!/usr/bin/env bash
# Session 16's validation of v16 (kseek.h ABI 3: attention_chunk in the kernel; kernels/NOTES.md "v16").
# One device call per mode, each ending before TOTAL_S (default 540 s) so its bundle comes back:
#   check   hopper + optest check-only (v16 changed every attention kernel), the GPU tests of the API (the
#           chunk cases, one per path), the fa3api grid and the serving grid (check), then the fa3api grid
#           timed (per call and graph) and serving rows s08/s09 against FA3
#   bench   bench26 against FA3, per call and graph (no-regression check against v15's runs 081456/082156)
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
case $mode in
  check)
    log "hopper check"; timeout -k 5 "$(cap 100)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
    log "optest check"; timeout -k 5 "$(cap 60)" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
    log "GPU tests"; timeout -k 5 "$(cap 170)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_attention_api_gpu.py \
      tests/gpu/test_fa3api_gpu.py tests/gpu/test_serving_gpu.py > "$OUT/gputests.txt" 2>&1; tail -15 "$OUT/gputests.txt"
    log "fa3api grid"; timeout -k 5 "$(cap 120)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
      > "$OUT/grid.txt" 2>&1; tail -32 "$OUT/grid.txt"
    log "serving s08/s09"; timeout -k 5 "$(cap 90)" python3 tools/serving_bench.py --out "$OUT/serving" --rows '^s0[89]' \
      --budget "${BUDGET_S:-0.3}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
    cat "$OUT/serving/serving.txt" 2>/dev/null || tail -5 "$OUT/serving.log" ;;
  bench)
    log "bench26 vs fa3"; timeout -k 5 "$(cap 500)" "${ev[@]}" --grid bench26 --baseline fa3 --graph \
      > "$OUT/bench26.txt" 2>&1; tail -40 "$OUT/bench26.txt" ;;
  *) echo "unknown mode $mode (check, bench)"; exit 2 ;;
esac
log done
