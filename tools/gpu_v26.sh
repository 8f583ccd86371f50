#!/usr/bin/env bash
# Session 26 on the H200 (kernels/NOTES.md "v26"). One device call per mode, each ending before TOTAL_S:
#   append  v26a (an append's fast-path hit in one foreign call, kseek_kv_update_then): the GPU tests of the fast
#           path, kv_update and the fa3api rows; tools/append_cost.py on the append rows (one call, two calls,
#           without the append, alternately); the fa3api grid
#   grid2   the per-call timing in turns (call_timing.per_call_ms): its GPU test, then the fa3api grid twice in a row
#           (the contract's median of two consecutive runs), into grid_a/ and grid_b/
#   early   v26b (a slotted mixed call of <= 32 sequences forks early, 1 SM reserved): the GPU tests of the fa3api
#           rows and the fast path; varlen_q_paged and append_plain_varlen with it and without it
#           (KSEEK_FA3_MIXED_EARLY_BATCH=0), alternately, twice; varlen_q_paged kernel by kernel; the fa3api grid
#           twice in a row (grid_a/, grid_b/)
#   final   the GPU tests of every path v26 touches (fast path, kv_update, fa3api, attention API, decode wide, serving,
#           the slotted mixed call, call timing), then FlashAttention-3's forward tests (four groups in parallel, 300
#           cases per function, seed FA3_SEED (27), until the call's budget)
#   rest    the slotted mixed call's variant test (its two builds carried: final's cap cut it while it built), then
#           serving s01-s09 against FA3 (their calls have 60+ sequences: v26b leaves their order as it was)
#   fa3     FlashAttention-3's forward tests alone (seed FA3_SEED, default 28; deadline FA3_DEADLINE_S, default 460 s,
#           so that ~300 cases per function finish: at 300 s seed 27 ran 249-254), with TOTAL_S=575
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v26.sh append
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-append}
OUT=${OUT:-/tmp/v26_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
source tools/gpu_steps.sh     # timeline, steps, grid, serving, hopper
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  append)
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fastpath_gpu.py \
      tests/gpu/test_kv_update_gpu.py tests/gpu/test_fa3api_gpu.py > "$OUT/gputests.txt" 2>&1
    tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
    log "append cost"; timeout -k 5 "$(cap 150)" python3 tools/append_cost.py \
      '^(append_rotary_prefill|append_plain_varlen|append_rotary_decode)$' "${ROUNDS:-3}" > "$OUT/append_cost.txt" 2>&1
    grep -E "medians|Error" "$OUT/append_cost.txt" | cut -c1-200
    grid
    ;;
  grid2)
    log "GPU tests"; timeout -k 5 "$(cap 60)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_call_timing_gpu.py \
      > "$OUT/gputests.txt" 2>&1; tail -3 "$OUT/gputests.txt"
    for t in a b; do OUT0=$OUT; OUT=$OUT0/grid_$t; mkdir -p "$OUT"; grid; OUT=$OUT0; done
    ;;
  early)
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fa3api_gpu.py \
      tests/gpu/test_fastpath_gpu.py > "$OUT/gputests.txt" 2>&1
    tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
    MR='^(varlen_q_paged|append_plain_varlen)$'
    for t in a b; do
      for d in on off; do
        defs=; [ $d = off ] && defs=KSEEK_FA3_MIXED_EARLY_BATCH=0
        log "rows early=$d $t"; KSEEK_ATTENTION_DEFINES=$defs timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py --rows "$MR" \
          --reps 20 --json "$OUT/rows_${d}_$t.json" > "$OUT/rows_${d}_$t.txt" 2>&1
        grep -A 2 '^row ' "$OUT/rows_${d}_$t.txt" | cut -c1-120
      done
    done
    steps vqp '^varlen_q_paged$'
    for t in a b; do OUT0=$OUT; OUT=$OUT0/grid_$t; mkdir -p "$OUT"; grid; OUT=$OUT0; done
    ;;
  final)
    log "GPU tests"; timeout -k 5 "$(cap 240)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fa3api_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_decode_wide_gpu.py \
      tests/gpu/test_serving_gpu.py tests/gpu/test_kv_update_gpu.py tests/gpu/test_call_timing_gpu.py \
      tests/gpu/test_variants_gpu.py::test_mixed_gather_runs_the_serving_rows_prefill_part_over_dense_slots \
      > "$OUT/gputests.txt" 2>&1
    tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
    log "FA3 forward tests, seed ${FA3_SEED:-27}"; OUT=$OUT/fa3tests FA3_SEED=${FA3_SEED:-27} SKIP_GRID=1 \
      BUDGET_S=$(( $(left) - 15 )) FA3_DEADLINE_S=300 bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -40 "$OUT/fa3tests.log" | grep -E "^\||failures|deadline" | cut -c1-180 | head -30
    ;;
  rest)
    log "GPU test"; timeout -k 5 "$(cap 90)" python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/gpu/test_variants_gpu.py::test_mixed_gather_runs_the_serving_rows_prefill_part_over_dense_slots \
      > "$OUT/gputests.txt" 2>&1; tail -3 "$OUT/gputests.txt"
    serving
    ;;
  fa3)
    log "FA3 forward tests, seed ${FA3_SEED:-28}"; OUT=$OUT/fa3tests FA3_SEED=${FA3_SEED:-28} SKIP_GRID=1 \
      BUDGET_S=$(( $(left) - 10 )) FA3_DEADLINE_S=${FA3_DEADLINE_S:-460} bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -40 "$OUT/fa3tests.log" | grep -E "^\||failures|deadline" | cut -c1-180 | head -30
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log "done"
