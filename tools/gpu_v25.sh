#!/usr/bin/env bash
# Session 25 on the H200 (kernels/NOTES.md "v25"): issue 25's last per-call row (varlen_q_paged: a mixed call
# over a page-16 cache) taken apart. One device call per mode, each ending before TOTAL_S:
#   probe  per-call timelines (tools/call_timeline.py: where the GPU waits for the host) of the mixed and append
#          rows, host time and cProfile of varlen_q_paged, its kernels in graph replay at the default reserve and
#          on one stream (the KSEEK_FA3_MIXED_RESERVE=-1 probe build)
#   ab     v25 (page copies with 8 loads in flight; a slotted mixed call forks before the copy, its decode launched
#          first): varlen_q_paged kernel by kernel and its per-call timeline, the fa3api grid, serving s01-s09,
#          hopper correctness
#   ab2    the default again (v25 page copies, the old launch order) kernel by kernel, the grid, serving; then the
#          KSEEK_FA3_MIXED_FORK_EARLY=1 probe build swept at reserves 1 and 20 over varlen_q_paged and s01-s03
#   small  v25c: the fa3api mixed rows with KSEEK_FA3_MIXED_SMALL=16 (small mixed calls whole on the prefill) and
#          without it, alternately, then their kernels in graph replay with it
#   final  v25c (small dense mixed calls whole on the prefill, the default): the GPU tests of the paths it
#          touches, hopper correctness, the fa3api grid, varlen_q_dense kernel by kernel, then FlashAttention-3's
#          forward tests (four groups in parallel, 300 cases per function, until the call's budget)
#   fa3more  FlashAttention-3's forward tests again, another seeded sample (FA3_SEED, default 26), until TOTAL_S
#   tests  the GPU tests of the paths v25 touches, the reserve sweep (0, 8, 20, 40 SMs) in v25's launch order
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v25.sh probe
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-probe}
OUT=${OUT:-/tmp/v25_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
source tools/gpu_steps.sh    # timeline, steps, grid, serving, hopper
R0=KSEEK_FA3_MIXED_RESERVE=-1                          # the probe build (reserve 0 until set: one stream)
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  probe)
    timeline mixed '^(varlen_q_paged|varlen_q_dense|append_rotary_decode|append_rotary_prefill)$'
    log "host profile"; timeout -k 5 "$(cap 90)" python3 tools/host_profile.py --rows '^varlen_q_paged$' \
      --reps 300 --top 25 > "$OUT/host_profile.txt" 2>&1; grep -E "us/call" "$OUT/host_profile.txt"
    steps vqp '^varlen_q_paged$'
    steps vqp_r0 '^varlen_q_paged$' "$R0"
    timeline vqp_r0 '^varlen_q_paged$' "$R0"
    ;;
  ab)
    steps vqp '^varlen_q_paged$'
    timeline vqp '^(varlen_q_paged|append_plain_varlen)$'
    grid
    serving
    hopper
    ;;
  ab2)
    steps vqp '^varlen_q_paged$'
    grid
    serving
    log "fork-early sweep"; KSEEK_ATTENTION_DEFINES=$R0,KSEEK_FA3_MIXED_FORK_EARLY=1 timeout -k 5 "$(cap 150)" \
      python3 tools/mixed_overlap_probe.py '^s0[1-3]|varlen_q_paged$' 1,20 > "$OUT/forkearly_sweep.txt" 2>&1
    grep -v "^  " "$OUT/forkearly_sweep.txt" | cut -c1-150
    ;;
  small)
    MR='^(varlen_q_dense|varlen_q_paged|append_plain_varlen|append_rotary_prefill|seqused_q_varlen)$'
    for t in a b; do
      log "grid default $t"; timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py --rows "$MR" --reps 20 --json "$OUT/grid_def_$t.json" \
        > "$OUT/grid_def_$t.txt" 2>&1; grep -A 6 '^row ' "$OUT/grid_def_$t.txt" | cut -c1-120
      log "grid small $t"; KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_SMALL=16 timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py \
        --rows "$MR" --reps 20 --json "$OUT/grid_small_$t.json" > "$OUT/grid_small_$t.txt" 2>&1
      grep -A 6 '^row ' "$OUT/grid_small_$t.txt" | cut -c1-120
    done
    steps small '^(varlen_q_dense|varlen_q_paged|append_plain_varlen)$' KSEEK_FA3_MIXED_SMALL=16
    ;;
  final)
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fa3api_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_decode_wide_gpu.py \
      tests/gpu/test_serving_gpu.py > "$OUT/gputests.txt" 2>&1
    tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
    hopper
    grid
    steps vqd '^varlen_q_dense$'
    log "FA3 forward tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 15 )) FA3_DEADLINE_S=300 \
      bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -40 "$OUT/fa3tests.log" | grep -E "^\||failures|deadline" | cut -c1-180 | head -30
    ;;
  fa3more)
    log "FA3 forward tests, seed ${FA3_SEED:-26}"; OUT=$OUT/fa3tests FA3_SEED=${FA3_SEED:-26} SKIP_GRID=1 \
      BUDGET_S=$(( $(left) - 10 )) FA3_DEADLINE_S=400 bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -40 "$OUT/fa3tests.log" | grep -E "^\||failures|deadline" | cut -c1-180 | head -30
    ;;
  tests)
    log "GPU tests"; timeout -k 5 "$(cap 240)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_serving_gpu.py \
      tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py tests/gpu/test_fastpath_gpu.py \
      tests/gpu/test_variants_gpu.py::test_mixed_gather_runs_the_serving_rows_prefill_part_over_dense_slots > "$OUT/gputests.txt" 2>&1
    tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
    log "reserve sweep"; KSEEK_ATTENTION_DEFINES=$R0 timeout -k 5 "$(cap 200)" python3 tools/mixed_overlap_probe.py \
      "${ROWS:-^s0|varlen_q_paged\$|append_plain_varlen}" "${RESERVES:-0,8,20,40}" > "$OUT/reserve_sweep.txt" 2>&1
    grep -v "^  " "$OUT/reserve_sweep.txt" | cut -c1-150
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log "done"
