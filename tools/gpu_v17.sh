#!/usr/bin/env bash
# Session 17 on the H200 (kernels/NOTES.md "Session 17"): the kv_update kernel, seqused_q as segments and
# the leaner host path, checked and timed. One device call per mode, each ending before TOTAL_S (540 s):
#   check   the GPU tests (kv_update bit for bit against the torch ops, the API, the fa3api rows' paths),
#           hopper + optest check-only (the naive kernels of 91aacf0 never ran on a GPU), the fa3api grid
#           timed (per call and graph, against FA3 or the call without the feature), and the host cost per
#           call on CUDA by stage (tools/hostcost.py --device cuda)
#   fa3     the fa3api grid timed and the host cost again, FlashAttention-3's forward tests at FA3_SAMPLE cases per function (tools/gpu_fa3api.sh, SKIP_GRID=1;
#           carry .fa3tests too), then s01's step kernel by kernel (tools/step_kernels.py) with what is left
#   final   GPU tests with the serving ones, the fa3api grid, serving s01-s09 against FA3, reserve 0 vs 20, hopper/optest
#   seg     the seqused_q segments kernel and the Dv split: GPU tests, the fa3api grid, FA3 varlen + output tests
#   overlap the KSEEK_FA3_MIXED_RESERVE sweep (tools/mixed_overlap_probe.py) on serving rows s01-s07
# carry .whl .kseek-cache .fa3 (.fa3tests for fa3):  KSEEK_GIT_REV=<sha> bash tools/gpu_v17.sh check|fa3
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
OUT=${OUT:-/tmp/v17_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
ev=(python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs")
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  check)
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_kv_update_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_fa3api_gpu.py > "$OUT/gputests.txt" 2>&1; tail -4 "$OUT/gputests.txt"
    log "fa3api grid"; timeout -k 5 "$(cap 120)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
      > "$OUT/grid.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
    log "hostcost cuda"; timeout -k 5 "$(cap 60)" python3 tools/hostcost.py --device cuda --reps "${HOSTCOST_REPS:-50}" \
      --json "$OUT/hostcost_cuda.json" > "$OUT/hostcost_cuda.txt" 2>&1; cut -c1-60 "$OUT/hostcost_cuda.txt"
    log "hopper check"; timeout -k 5 "$(cap 100)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
    log "optest check"; timeout -k 5 "$(cap 60)" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
    ;;
  fa3)
    log "fa3api grid"; timeout -k 5 "$(cap 120)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
      > "$OUT/grid.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
    log "hostcost cuda"; timeout -k 5 "$(cap 60)" python3 tools/hostcost.py --device cuda --reps "${HOSTCOST_REPS:-50}" \
      --json "$OUT/hostcost_cuda.json" > "$OUT/hostcost_cuda.txt" 2>&1; cut -c1-60 "$OUT/hostcost_cuda.txt"
    log "FA3 forward tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - ${STEP_S:-90} )) bash tools/gpu_fa3api.sh \
      > "$OUT/fa3tests.log" 2>&1; tail -22 "$OUT/fa3tests.log" | cut -c1-160
    log "s01 step kernels"; timeout -k 5 "$(cap "${STEP_S:-90}")" python3 tools/step_kernels.py "${STEP_ROWS:-^s0[14]}" \
      > "$OUT/step_kernels.txt" 2>&1; tail -40 "$OUT/step_kernels.txt" | cut -c1-150
    ;;
  overlap)   # the KSEEK_FA3_MIXED_RESERVE sweep on the serving rows (the -1 probe build, prebuilt into .kseek-cache)
    log "mixed overlap probe"; KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 timeout -k 5 "$(cap 480)" \
      python3 tools/mixed_overlap_probe.py "${ROWS:-^s0[1-7]}" "${RESERVES:-0,8,20,32,44,66}" > "$OUT/overlap.txt" 2>&1
    grep -v "^  " "$OUT/overlap.txt" | tail -12
    ;;
  final)   # the kernel as committed: GPU tests (serving too), the fa3api grid, serving s01-s09 against FA3, the
           # reserve sweep again at 0 and 20 (probe build), correctness of hopper/optest
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_kv_update_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_serving_gpu.py > "$OUT/gputests.txt" 2>&1
    tail -4 "$OUT/gputests.txt"
    log "fa3api grid"; timeout -k 5 "$(cap 120)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
      > "$OUT/grid.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
    log "serving s01-s09"; timeout -k 5 "$(cap 200)" python3 tools/serving_bench.py --out "$OUT/serving" --rows '^s0' \
      --budget "${BUDGET_S:-0.3}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
    cat "$OUT/serving/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving.log"
    log "reserve 0 vs 20"; KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 timeout -k 5 "$(cap 100)" \
      python3 tools/mixed_overlap_probe.py '^s0[1-7]' 0,20,0,20 > "$OUT/overlap.txt" 2>&1; grep -v "^  " "$OUT/overlap.txt" | tail -9
    log "hopper check"; timeout -k 5 "$(cap 100)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
    log "optest check"; timeout -k 5 "$(cap 60)" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
    ;;
  seg)   # the seqused_q segments kernel: GPU tests, the grid, FA3's varlen and kvcache tests (carry .fa3tests)
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_seqused_segments_gpu.py \
      tests/gpu/test_kv_update_gpu.py tests/gpu/test_attention_api_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_serving_gpu.py \
      > "$OUT/gputests.txt" 2>&1; tail -4 "$OUT/gputests.txt"
    log "fa3api grid"; timeout -k 5 "$(cap 120)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
      > "$OUT/grid.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
    log "FA3 varlen + output tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_varlen_output test_flash_attn_output}" bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -14 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  *) echo "unknown mode $mode (check, fa3, overlap, final, seg)"; exit 2 ;;
esac
log done
