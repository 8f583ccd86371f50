#!/usr/bin/env bash
# Session 14's validation of v15 (kernels/NOTES.md "v15"): the page copy in 16-row blocks, variant 2's copy
# only for pages of <= 16 rows, and the -fno-gnu-unique build flag that lets two builds share a process.
# Two modes, one device call each, each ending before TOTAL_S (default 540 s) so its bundle comes back:
#   check   hopper + optest check-only, tests/gpu/test_variants_gpu.py (every variant test, mixed_gather
#           among them), then the serving rows s01-s07 timed against FA3 with the default build and with
#           -DKSEEK_FA3_MIXED_GATHER=1 (v14b), per call and in graph replay
#   time    the hopper grid's paged rows and production p05-p07 against FA3, per call and graph (compare
#           the paged rows with runs h200-hopper-20261202-053940 (v14) and 20261201-220056 (v13))
# Every build prebuilt here into .kseek-cache; carry .whl .kseek-cache .fa3:
#   KSEEK_GIT_REV=<sha> bash tools/gpu_v15.sh check|time
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
OUT=${OUT:-/tmp/v15_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
ev=(python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs" ${EVDEF:+--define "$EVDEF"})
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  check)
    log "hopper check"; timeout -k 5 "$(cap 90)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
    log "optest check"; timeout -k 5 "$(cap 60)" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
    log "GPU tests"; timeout -k 5 "$(cap 170)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_variants_gpu.py \
      > "$OUT/gputests.txt" 2>&1; tail -4 "$OUT/gputests.txt"
    for side in off on; do
      d=""; [ $side = on ] && d=KSEEK_FA3_MIXED_GATHER=1
      log "serving $side ($d)"
      KSEEK_ATTENTION_DEFINES=$d timeout -k 5 "$(cap 90)" python3 tools/serving_bench.py --out "$OUT/serving_$side" \
        --rows '^s0[1-7]' --budget "${BUDGET_S:-0.3}" --replays "${REPLAYS:-20}" > "$OUT/serving_$side.log" 2>&1
      cat "$OUT/serving_$side/serving.txt" 2>/dev/null || tail -5 "$OUT/serving_$side.log"
    done ;;
  time)
    log "hopper paged vs fa3"; timeout -k 5 "$(cap 330)" "${ev[@]}" --grid hopper --scenarios paged_ --baseline fa3 --graph \
      --budget "${BUDGET:-0.15}" > "$OUT/hopper_paged.txt" 2>&1; grep -E '^correct' "$OUT/hopper_paged.txt"
    log "production p05-p07 vs fa3"; timeout -k 5 "$(cap 150)" "${ev[@]}" --grid production --scenarios 5-7 --baseline fa3 \
      --graph > "$OUT/production.txt" 2>&1; tail -12 "$OUT/production.txt" ;;
  *) echo "unknown mode $mode (check, time)"; exit 2 ;;
esac
log done
