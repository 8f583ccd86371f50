#!/usr/bin/env bash
# Session 18 on the H200 (kernels/NOTES.md "v18"): kernels/qv_fwd.cu (FA3's qv term on tensor cores) checked
# and timed. One device call per mode, each ending before TOTAL_S (540 s):
#   qv      GPU tests (tests/gpu/test_qv_gpu.py first, then the API, fa3api, serving, helper-kernel tests), the
#           fa3api grid timed, serving s08 (MLA) and s01 against FA3, then FA3's output / varlen / kvcache
#           tests (their qv cases now take the qv kernel) with what is left
#   probe   qv GPU tests, tools/qv_probe.py (split counts against FA3 on MLA shapes), serving s08
#   v18     the wgmma long-sequence kernel and the plain D 64 / Dv 256-512 route: qv GPU tests, the other GPU
#           tests, tools/qv_probe.py (wgmma / mma / old route A/B), the fa3api grid, serving s08, FA3's output
#           and varlen tests (their d 64 / dv 256-512 cases take kernels/qv_fwd) with what is left
#   ws      (session 19) the warp-specialized long-sequence kernel (kernels/qv_fwd/qv_ws.cuh): qv and fast-path GPU
#           tests, tools/qv_probe.py (ws / wg / mma / old A/B), serving s08, the fa3api grid's qv, dv, append and
#           seqused rows, then FA3's
#           output / varlen tests with what is left
#   tma     (session 20) the same with K/V blocks by TMA (alias of ws; FA3_GROUPS adds the kvcache tests)
#   tma2    the TMA producer fixed: tests, probe, ncu per-instruction stall samples of ours and FA3 on dv512
#   host    qv tests, host time per call of the qv route against FA3 (tools/host_profile.py), probe, rows, s08
#   qvfast  the qv route's fast-path entries on (KSEEK_ATTENTION_FASTPATH_QV=1): GPU tests, host time, qv/dv rows
#   s21     (v21: separate K / V rings) qvfast's tests, the probe, host time and rows (append / seqused too), then
#           ncu's source page of qv_ws on dv512
#   s21b    (v21b: staged epilogue, skipped rescale) GPU tests, probe, fa3api rows, s08, ncu source page on dv512
#   s21c    (v21c: persistent A/B, overlap off) GPU tests, probe, s08, FA3's output / varlen / kvcache tests
#   s21d    (v21d = v21b's kernel, serial default) GPU tests, probe, the fa3api grid, serving s01-s09, FA3's tests
#   ws2     the same kernel with the producer's coalesced mapping: qv GPU tests, the probe, s08, ncu on dv512 and
#           s08's prefill chunks (tools/qv_ncu.py)
#   final   the committed tree (qv kernel + host fast path): every attention GPU test, the fa3api grid, the host
#           cost per call on CUDA, serving s01-s09 against FA3
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v18.sh qv
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-qv}
OUT=${OUT:-/tmp/v18_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
# The steps several modes share. serving_rows LABEL CAP ROWS BUDGET: serving_bench over ROWS (or $ROWS)
# against FA3; grid_all CAP: the whole fa3api grid; qv_probe_run CAP: tools/qv_probe.py; fa3tests_all:
# FA3's output / varlen / kvcache forward tests (or $FA3_GROUPS) with what is left.
serving_rows() {
  log "$1"; timeout -k 5 "$(cap "$2")" python3 tools/serving_bench.py --out "$OUT/serving" --rows "${ROWS:-$3}" \
    --budget "${BUDGET_S:-$4}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
  cat "$OUT/serving/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving.log"
}
grid_all() {
  log "fa3api grid"; timeout -k 5 "$(cap "$1")" python3 tools/fa3api_grid.py --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" \
    > "$OUT/grid.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
}
qv_probe_run() {
  log "qv probe"; timeout -k 5 "$(cap "$1")" python3 tools/qv_probe.py --json "$OUT/qv_probe.json" > "$OUT/qv_probe.txt" 2>&1
  cut -c1-140 "$OUT/qv_probe.txt"
}
fa3tests_all() {
  log "FA3 output / varlen / kvcache tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
    FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_output test_flash_attn_varlen_output test_flash_attn_kvcache}" \
    bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
  tail -16 "$OUT/fa3tests.log" | cut -c1-160
}
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  qv)
    log "qv GPU tests"; timeout -k 5 "$(cap 150)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      > "$OUT/qvtests.txt" 2>&1; tail -30 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -30
    log "GPU tests"; timeout -k 5 "$(cap 150)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fa3api_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_serving_gpu.py tests/gpu/test_seqused_segments_gpu.py \
      tests/gpu/test_kv_update_gpu.py > "$OUT/gputests.txt" 2>&1; tail -4 "$OUT/gputests.txt"
    grid_all 100
    serving_rows "serving s08 s01" 100 '^s0[18]' 0.3
    fa3tests_all
    ;;
  probe)
    log "qv GPU tests"; timeout -k 5 "$(cap 120)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      > "$OUT/qvtests.txt" 2>&1; tail -30 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -30
    qv_probe_run 200
    log "fa3api grid qv"; timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py --rows qv --reps "${GRID_REPS:-20}" \
      --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1; grep -A 3 '^row ' "$OUT/grid.txt" | cut -c1-120
    serving_rows "serving s08" 100 '^s08' 0.3
    ;;
  v18)
    log "qv GPU tests"; timeout -k 5 "$(cap 120)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      > "$OUT/qvtests.txt" 2>&1; tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -30
    log "GPU tests"; timeout -k 5 "$(cap 120)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fa3api_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_serving_gpu.py tests/gpu/test_seqused_segments_gpu.py \
      tests/gpu/test_kv_update_gpu.py > "$OUT/gputests.txt" 2>&1; tail -4 "$OUT/gputests.txt"
    qv_probe_run 150
    grid_all 80
    serving_rows "serving s08" 60 '^s08' 0.3
    log "FA3 output / varlen tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_output test_flash_attn_varlen_output}" bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -14 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  ws|tma)
    log "qv GPU tests"; timeout -k 5 "$(cap 120)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py > "$OUT/qvtests.txt" 2>&1; tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -30
    qv_probe_run 150
    serving_rows "serving s08" 60 '^s08' 0.3
    log "fa3api grid qv dv"; timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py --rows "${GRID_ROWS:-qv|dv|append|seqused}" \
      --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1; grep -A 10 "^row " "$OUT/grid.txt" | cut -c1-120
    log "FA3 output / varlen tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_output test_flash_attn_varlen_output}" bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -14 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  tma2)   # the TMA producer fixed: qv + fast-path tests, the probe, then Nsight Compute with per-instruction
          # stall samples (SASS source page) of ours and of FA3 on dv512, the fa3api rows, FA3's tests with what is left
    log "qv GPU tests"; timeout -k 5 "$(cap 90)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py > "$OUT/qvtests.txt" 2>&1; tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -20
    qv_probe_run 120
    for who in ours fa3; do
      flag=""; kn="regex:qv_attn_ws"; [ $who = fa3 ] && { flag="--fa3"; kn="regex:FlashAttnFwd"; }
      log "ncu source $who dv512"; timeout -k 5 "$(cap 80)" ncu --kernel-name-base demangled --kernel-name "$kn" --launch-skip 2 --launch-count 1 \
        --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source yes --page source \
        --print-source sass --csv python3 tools/qv_ncu.py dv512 $flag > "$OUT/ncu_src_${who}_dv512.csv" 2> "$OUT/ncu_src_${who}.err"
      ls -la "$OUT/ncu_src_${who}_dv512.csv"; tail -2 "$OUT/ncu_src_${who}.err"
    done
    log "fa3api grid qv dv"; timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py --rows "${GRID_ROWS:-qv|dv|append|seqused}" \
      --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1; grep -A 10 "^row " "$OUT/grid.txt" | cut -c1-120
    log "FA3 output / varlen / kvcache tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=$(( $(left) - 10 )) \
      FA3_GROUPS="${FA3_GROUPS:-test_flash_attn_output test_flash_attn_varlen_output test_flash_attn_kvcache}" \
      bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -14 "$OUT/fa3tests.log" | cut -c1-160
    ;;
  host)   # session 20's last call: the qv and fast-path tests (qv_ws's shared epilogue), the host time per call
          # of the qv route against FA3's with its cProfile, the probe, the fa3api qv/dv rows, s08
    log "qv GPU tests"; timeout -k 5 "$(cap 60)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py > "$OUT/qvtests.txt" 2>&1; tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -20
    log "host profile"; timeout -k 5 "$(cap 40)" python3 tools/host_profile.py > "$OUT/host_profile.txt" 2>&1
    grep "us/call" "$OUT/host_profile.txt"
    log "qv probe"; timeout -k 5 "$(cap 60)" python3 tools/qv_probe.py --json "$OUT/qv_probe.json" > "$OUT/qv_probe.txt" 2>&1
    grep -E "^row|prefills|dv" "$OUT/qv_probe.txt" | cut -c1-140
    log "fa3api grid qv dv"; timeout -k 5 "$(cap 30)" python3 tools/fa3api_grid.py --rows "${GRID_ROWS:-qv|dv}" \
      --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1; grep -A 4 "^row " "$OUT/grid.txt" | cut -c1-120
    serving_rows "serving s08" 30 '^s08' 0.3
    ;;
  qvfast)   # the qv route's fast-path entries (kernelseek/fastpath_qv.py, off by default until this passes):
            # the fast-path and qv GPU tests with KSEEK_ATTENTION_FASTPATH_QV=1, host time per call off and on
    log "GPU tests, qv entries on"; KSEEK_ATTENTION_FASTPATH_QV=1 timeout -k 5 "$(cap 90)" python3 -m pytest -q \
      -p no:cacheprovider -m gpu tests/gpu/test_fastpath_gpu.py tests/gpu/test_qv_gpu.py tests/gpu/test_fa3api_gpu.py \
      > "$OUT/qvfast_tests.txt" 2>&1; tail -40 "$OUT/qvfast_tests.txt" | grep -E "passed|failed|Error|assert" | head -20
    log "host profile off"; timeout -k 5 "$(cap 40)" python3 tools/host_profile.py > "$OUT/host_profile_off.txt" 2>&1
    grep "us/call" "$OUT/host_profile_off.txt"
    log "host profile on"; KSEEK_ATTENTION_FASTPATH_QV=1 timeout -k 5 "$(cap 40)" python3 tools/host_profile.py \
      > "$OUT/host_profile_on.txt" 2>&1; grep "us/call" "$OUT/host_profile_on.txt"
    log "fa3api grid qv dv, entries on"; KSEEK_ATTENTION_FASTPATH_QV=1 timeout -k 5 "$(cap 40)" python3 tools/fa3api_grid.py \
      --rows "${GRID_ROWS:-qv|dv}" --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1
    grep -A 4 "^row " "$OUT/grid.txt" | cut -c1-120
    ;;
  s21)     # session 21's first call: the qv fast-path entries on (tests, host time, rows), then ncu's source page
           # of the current qv_ws on dv512 (FA3's is in data/fa3api/session20-e4e2b18)
    log "GPU tests, qv entries on"; KSEEK_ATTENTION_FASTPATH_QV=1 timeout -k 5 "$(cap 150)" python3 -m pytest -q \
      -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py \
      > "$OUT/qvfast_tests.txt" 2>&1; tail -40 "$OUT/qvfast_tests.txt" | grep -E "passed|failed|Error|assert" | head -20
    qv_probe_run 130
    log "host profile on"; KSEEK_ATTENTION_FASTPATH_QV=1 timeout -k 5 "$(cap 40)" python3 tools/host_profile.py \
      > "$OUT/host_profile_on.txt" 2>&1; grep "us/call" "$OUT/host_profile_on.txt"
    log "fa3api rows, entries on"; KSEEK_ATTENTION_FASTPATH_QV=1 timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py \
      --rows "${GRID_ROWS:-qv|dv|append|seqused}" --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1
    grep -A 10 "^row " "$OUT/grid.txt" | cut -c1-120
    log "ncu source ours dv512"; timeout -k 5 "$(cap 80)" ncu --kernel-name-base demangled --kernel-name regex:qv_attn_ws \
      --launch-skip 2 --launch-count 1 --section WarpStateStats --section SourceCounters --section SpeedOfLight \
      --import-source yes --page source --print-source sass --csv python3 tools/qv_ncu.py dv512 \
      > "$OUT/ncu_src_ours_dv512.csv" 2> "$OUT/ncu_src_ours.err"
    python3 tools/ncu_source_stalls.py --top 40 --ops "$OUT/ncu_src_ours_dv512.csv" > "$OUT/ncu_stalls_ours_dv512.txt" 2>&1; head -48 "$OUT/ncu_stalls_ours_dv512.txt" | cut -c1-150
    ;;
  s21b)    # v21b: the staged epilogue and the skipped rescale: qv / fast-path / fa3api GPU tests (qv entries on by
           # default now), the probe, the fa3api rows, serving s08, ncu's source page of qv_ws on dv512
    log "GPU tests"; timeout -k 5 "$(cap 150)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py > "$OUT/qvtests.txt" 2>&1
    tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -20
    qv_probe_run 130
    log "fa3api rows"; timeout -k 5 "$(cap 60)" python3 tools/fa3api_grid.py --rows "${GRID_ROWS:-qv|dv|append|seqused}" \
      --reps "${GRID_REPS:-20}" --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1; grep -A 10 "^row " "$OUT/grid.txt" | cut -c1-120
    serving_rows "serving s08" 60 '^s08' 0.3
    log "ncu source ours dv512"; timeout -k 5 "$(cap 80)" ncu --kernel-name-base demangled --kernel-name regex:qv_attn_ws \
      --launch-skip 2 --launch-count 1 --section WarpStateStats --section SourceCounters --section SpeedOfLight \
      --import-source yes --page source --print-source sass --csv python3 tools/qv_ncu.py dv512 \
      > "$OUT/ncu_src_ours_dv512.csv" 2> "$OUT/ncu_src_ours.err"
    python3 tools/ncu_source_stalls.py --top 40 --ops "$OUT/ncu_src_ours_dv512.csv" > "$OUT/ncu_stalls_ours_dv512.txt" 2>&1
    head -24 "$OUT/ncu_stalls_ours_dv512.txt" | cut -c1-150; tail -3 "$OUT/ncu_stalls_ours_dv512.txt" | cut -c1-300
    ;;
  s21c)    # v21c: persistent CTAs (A/B mode 6), the overlap off by default: GPU tests, the probe, s08, then FA3's
           # output / varlen / kvcache tests with what is left
    log "GPU tests"; timeout -k 5 "$(cap 150)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py > "$OUT/qvtests.txt" 2>&1
    tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -20
    qv_probe_run 130
    serving_rows "serving s08" 60 '^s08' 0.3
    fa3tests_all
    ;;
  s21d)    # v21d (v21b's kernel, serial by default): GPU tests, the probe, the whole fa3api grid, serving s01-s09,
           # FA3's output / varlen / kvcache tests with what is left
    log "GPU tests"; timeout -k 5 "$(cap 150)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fastpath_gpu.py tests/gpu/test_fa3api_gpu.py > "$OUT/qvtests.txt" 2>&1
    tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -20
    qv_probe_run 100
    grid_all 90
    serving_rows "serving" 100 '^s0' 0.2
    fa3tests_all
    ;;
  ws2)   # the producer's coalesced mapping: qv tests, the probe, s08, and Nsight Compute on the ws kernel
    log "qv GPU tests"; timeout -k 5 "$(cap 90)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      > "$OUT/qvtests.txt" 2>&1; tail -40 "$OUT/qvtests.txt" | grep -E "passed|failed|Error|assert" | head -30
    qv_probe_run 120
    serving_rows "serving s08" 60 '^s08' 0.3
    for row in dv512 s08_prefills; do
      log "ncu $row"; timeout -k 5 "$(cap 90)" ncu --kernel-name regex:qv_attn_ws --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
        python3 tools/qv_ncu.py $row > "$OUT/ncu_$row.txt" 2>&1
      grep -E "Duration|Throughput|Busy|Stall|Warp Cycles|L2 Hit|Mem Pipes|Bandwidth" "$OUT/ncu_$row.txt" | head -30
    done
    ;;
  final)
    log "GPU tests"; timeout -k 5 "$(cap 100)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_qv_gpu.py \
      tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py tests/gpu/test_serving_gpu.py \
      tests/gpu/test_seqused_segments_gpu.py tests/gpu/test_kv_update_gpu.py > "$OUT/gputests.txt" 2>&1; tail -4 "$OUT/gputests.txt"
    grid_all 60
    log "hostcost cuda"; timeout -k 5 "$(cap 40)" python3 tools/hostcost.py --device cuda --reps "${HOSTCOST_REPS:-50}" \
      --json "$OUT/hostcost_cuda.json" > "$OUT/hostcost_cuda.txt" 2>&1; cut -c1-60 "$OUT/hostcost_cuda.txt"
    log "serving s01-s09"; timeout -k 5 "$(cap 120)" python3 tools/serving_bench.py --out "$OUT/serving" --rows '^s0' \
      --budget "${BUDGET_S:-0.2}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
    cat "$OUT/serving/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving.log"
    ;;
  *) echo "unknown mode $mode (qv, probe, v18, ws, ws2, final)"; exit 2 ;;
esac
log done
