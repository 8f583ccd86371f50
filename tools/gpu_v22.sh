#!/usr/bin/env bash
# Session 22 on the H200 (kernels/NOTES.md "v22"): the decode side of issue 25's last rows. One device call
# per mode, each ending before TOTAL_S (540 s):
#   s22   GPU tests (qv, fast path, fa3api, attention API), the whole fa3api grid, the rows under 0.8x kernel by
#         kernel in graph replay (tools/step_kernels.py --fa3api), the qv probe, hopper correctness, serving
#         s01-s09 against FA3 with what is left
#   s22b  (v22b: the deep ring by bulk copies, qv_combine a CTA per row) GPU tests with the deep ring's own, the
#         grid, step kernels, the qv probe, hopper correctness, FA3's kvcache and output tests with what is left
#   s22c  (v22c: 8-warp wide decode, qv splits >= 64 keys, varlen sections by mean keys) GPU tests, the grid
#         twice, step kernels, the qv probe, hopper correctness, FA3's kvcache and varlen tests with what is left
#   final the session's last commit: GPU tests, the grid twice, step kernels
#   grid  the fa3api grid twice (the rows judged per call move with the host) and the step kernels
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v22.sh s22
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-s22}
OUT=${OUT:-/tmp/v22_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
ev=(python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs")
STEPS=${STEP_ROWS:-varlen_q_dense|seqused_q_varlen|splits_decode|qv_mla_decode|append_plain}
grid() {   # grid FILE_TAG: the whole fa3api grid
  log "fa3api grid $1"; timeout -k 5 "$(cap 90)" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" \
    --json "$OUT/grid$1.json" > "$OUT/grid$1.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid$1.txt" | cut -c1-120
}
steps() {
  log "step kernels"; timeout -k 5 "$(cap 90)" python3 tools/step_kernels.py --fa3api "$STEPS" > "$OUT/step_kernels.txt" 2>&1
  cut -c1-130 "$OUT/step_kernels.txt" | head -90
}
probe_and_hopper() {   # the qv probe, then the hopper grid's correctness
  log "qv probe"; timeout -k 5 "$(cap 70)" python3 tools/qv_probe.py --json "$OUT/qv_probe.json" > "$OUT/qv_probe.txt" 2>&1
  cut -c1-140 "$OUT/qv_probe.txt"
  log "hopper check"; timeout -k 5 "$(cap 80)" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
}
rows_and_steps() {     # the GPU tests' summary, the whole grid, the step kernels
  tail -40 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -20
  grid ""
  steps
}
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  s22)
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py > "$OUT/gputests.txt" 2>&1
    rows_and_steps
    probe_and_hopper
    log "serving"; timeout -k 5 "$(cap 100)" python3 tools/serving_bench.py --out "$OUT/serving" --rows "${ROWS:-^s0}" \
      --budget "${BUDGET_S:-0.2}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
    cat "$OUT/serving/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving.log"
    ;;
  s22b)    # v22b: the deep ring by bulk copies, qv_combine one CTA per row: GPU tests (the deep ring's own too), the
           # fa3api grid, step kernels, the qv probe, hopper correctness, FA3's kvcache tests (num_splits, small
           # batches: the deep ring) and output tests with what is left
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_wide_gpu.py \
      tests/gpu/test_qv_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py \
      > "$OUT/gputests.txt" 2>&1
    rows_and_steps
    probe_and_hopper
    log "FA3 kvcache / output tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_kvcache test_flash_attn_output}" bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -16 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  s22c)    # v22c: the wide decode (8 warps), qv splits of >= 64 keys, varlen sections by mean keys: GPU tests, the
           # grid twice (per-call rows move with the host), step kernels, the qv probe, hopper correctness, FA3's
           # kvcache and varlen tests with what is left
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_wide_gpu.py \
      tests/gpu/test_qv_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py \
      tests/gpu/test_seqused_segments_gpu.py > "$OUT/gputests.txt" 2>&1
    rows_and_steps
    grid 2
    probe_and_hopper
    log "FA3 kvcache / varlen tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_kvcache test_flash_attn_varlen_output}" bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -16 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  final)   # the session's last commit: GPU tests, the grid twice, step kernels
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_wide_gpu.py \
      tests/gpu/test_qv_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py \
      tests/gpu/test_seqused_segments_gpu.py > "$OUT/gputests.txt" 2>&1
    rows_and_steps
    grid 2
    ;;
  grid)
    grid 1
    grid 2
    steps
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log "done"
