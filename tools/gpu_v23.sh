#!/usr/bin/env bash
# Session 23 on the H200 (kernels/NOTES.md "v23"): packed-query prefill O by TMA store (whole 64-row boxes
# inside their sequence) and the decode split count of mixed calls. One device call per mode, each ending
# before TOTAL_S (540 s):
#   ab     the varlen grid against FA3: default, KSEEK_FA3_OSTORE=densetma (v22's epilogue), default again;
#          the fa3api step kernels (varlen_q_dense, seqused_q_varlen), the fa3api grid, hopper correctness
#   ab2    (v23b) the varlen grid, step kernels and serving with the mixed call's CTA budget and without it
#   tests  GPU tests (attention API, fast path, fa3api, segments, wide decode), hopper and varlen correctness,
#          then FA3's varlen and kvcache tests with what is left
#   final  bench26 against FA3 once, the varlen grid, the fa3api grid
#   final2 the whole GPU test set (qv's too), bench26 against FA3 again
#   bench  bench26 against FA3 twice (per call and graph), serving s01-s09 with what is left
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v23.sh ab
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-ab}
OUT=${OUT:-/tmp/v23_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
ev=(python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs")
STEPS=${STEP_ROWS:-varlen_q_dense|seqused_q_varlen}
varlen() {   # varlen TAG [--define ...]: the varlen grid against FA3, per call and graph
  local tag=$1; shift
  log "varlen $tag $*"; timeout -k 5 "$(cap 100)" "${ev[@]}" --grid varlen --baseline fa3 --graph --budget "${BUDGET:-0.15}" "$@" \
    > "$OUT/varlen_$tag.txt" 2>&1; grep -E "^ *[0-9]+ |geomean|correct" "$OUT/varlen_$tag.txt" | cut -c1-150 | head -14
}
fa3grid() {   # the fa3api grid once
  log "fa3api grid"; timeout -k 5 "$(cap 90)" python3 tools/fa3api_grid.py --reps 20 --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1
  grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
}
check() {     # check GRID: correctness only, into $OUT/GRID.txt (hopper) or $OUT/GRID_check.txt
  local f=$OUT/$1.txt; [ "$1" = hopper ] || f=$OUT/$1_check.txt
  log "$1 check"; timeout -k 5 "$(cap "${2:-80}")" "${ev[@]}" --grid "$1" --check-only > "$f" 2>&1; grep -E '^correct' "$f"
}
steps() {     # steps ROWS [OUTFILE]: the fa3api rows kernel by kernel in graph replay
  log "step kernels $1"; timeout -k 5 "$(cap 90)" python3 tools/step_kernels.py --fa3api "$1" > "${2:-$OUT/step_kernels.txt}" 2>&1
  cut -c1-130 "${2:-$OUT/step_kernels.txt}" | grep -v Warn | head -40
}
gputests() {  # gputests FILE...: the GPU tests given, into $OUT/gputests.txt
  log "GPU tests"; timeout -k 5 "$(cap 220)" python3 -m pytest -q -p no:cacheprovider -m gpu "$@" > "$OUT/gputests.txt" 2>&1
  tail -40 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -20
}
bench26() {   # bench26 TAG: bench26 against FA3, per call and graph
  log "bench26 $1"; timeout -k 5 "$(cap 150)" "${ev[@]}" --grid bench26 --baseline fa3 --graph --budget 0.15 \
    > "$OUT/bench26$1.txt" 2>&1; grep -E "^ *[0-9]+ |geomean|correct" "$OUT/bench26$1.txt" | cut -c1-150
}
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  ab)
    varlen def1
    varlen dt1 --define KSEEK_FA3_OSTORE=densetma
    varlen def2
    steps "$STEPS"
    fa3grid
    check hopper
    ;;
  ab2)     # v23b: varlen on the dynamic kernels at every head dim, the mixed call's balanced CTA budget: the varlen
           # grid, step kernels with the budget and without (KSEEK_FA3_MIXED_BALANCE=0, v23's fixed reserve), the
           # fa3api grid, serving s01-s09 with the budget, then without it with what is left
    varlen def3
    steps "$STEPS"
    KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_BALANCE=0 steps varlen_q_dense "$OUT/step_kernels_b0.txt"
    fa3grid
    for b in 1 0; do   # (1 = the default build: no define, so the carried build serves it)
      def=""; [ $b = 0 ] && def=KSEEK_FA3_MIXED_BALANCE=0
      log "serving balance $b"; KSEEK_ATTENTION_DEFINES=$def timeout -k 5 "$(cap 130)" python3 tools/serving_bench.py \
        --out "$OUT/serving_b$b" --rows "${ROWS:-^s0}" --budget "${BUDGET_S:-0.15}" --replays "${REPLAYS:-20}" > "$OUT/serving_b$b.log" 2>&1
      cat "$OUT/serving_b$b/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving_b$b.log"
    done
    ;;
  tests)
    gputests tests/gpu/test_attention_api_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py \
      tests/gpu/test_seqused_segments_gpu.py tests/gpu/test_decode_wide_gpu.py
    check hopper
    check varlen 60
    log "FA3 varlen / kvcache tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_varlen_output test_flash_attn_kvcache}" bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -16 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  bench)
    bench26 _1
    bench26 _2
    log "serving"; timeout -k 5 "$(cap 150)" python3 tools/serving_bench.py --out "$OUT/serving" --rows "${ROWS:-^s0}" \
      --budget "${BUDGET_S:-0.2}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
    cat "$OUT/serving/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving.log"
    ;;
  final)   # the session's last kernels: bench26 against FA3 (dense rows: the epilogue's SASS changed), the varlen grid,
           # the fa3api grid
    bench26 ""
    varlen final
    fa3grid
    ;;
  final2)  # the whole GPU test set of the final commit (session 22's, qv's among them), then bench26 against FA3 again
    gputests tests/gpu/test_decode_wide_gpu.py tests/gpu/test_qv_gpu.py tests/gpu/test_fastpath_gpu.py \
      tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py tests/gpu/test_seqused_segments_gpu.py
    bench26 ""
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log "done"
