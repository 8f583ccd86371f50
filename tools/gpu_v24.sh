#!/usr/bin/env bash
# Session 24 on the H200 (kernels/NOTES.md "v24"): where a mixed call's decode part should run beside its
# prefill part, and the host time of the append pair. One device call per mode, each ending before TOTAL_S:
#   probe  host time and cProfile of the fa3api per-call rows under 0.8x (append_rotary_prefill, varlen_q_dense),
#          then the reserve sweep (tools/mixed_overlap_probe.py, the KSEEK_FA3_MIXED_RESERVE=-1 build) over
#          serving s01-s09 and the fa3api mixed rows
#   probe2, steps, final, ab24, ncu, final24, decode: see each mode's comment below
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v24.sh probe
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-probe}
OUT=${OUT:-/tmp/v24_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
gputests() {  # gputests CAP FILE...: the GPU tests given, into $OUT/gputests.txt
  local c=$1; shift
  log "GPU tests"; timeout -k 5 "$(cap "$c")" python3 -m pytest -q -p no:cacheprovider -m gpu "$@" > "$OUT/gputests.txt" 2>&1
  tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
}
hopper() {    # hopper correctness only
  log "hopper check"; timeout -k 5 "$(cap 80)" python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs" \
    --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
}
vqd_steps() { # vqd_steps TAG [DEFINES]: varlen_q_dense kernel by kernel, into $OUT/steps_TAG.txt
  KSEEK_ATTENTION_DEFINES=${2:-} timeout -k 5 "$(cap 60)" python3 tools/step_kernels.py --fa3api varlen_q_dense > "$OUT/steps_$1.txt" 2>&1
  grep -v Warn "$OUT/steps_$1.txt" | grep -v _warn | cut -c1-110 | head -14
}
grid() {      # grid TAG [ROWS] [DEFINES]: the fa3api grid (or its ROWS), into $OUT/grid$TAG.{txt,json}
  log "fa3api grid $2"; KSEEK_ATTENTION_DEFINES=${3:-} timeout -k 5 "$(cap 90)" python3 tools/fa3api_grid.py ${2:+--rows "$2"} \
    --reps 20 --json "$OUT/grid$1.json" > "$OUT/grid$1.txt" 2>&1; grep -A 22 '^row ' "$OUT/grid$1.txt" | cut -c1-120
}
serving() {   # serving s01-s09 against FA3
  log "serving"; timeout -k 5 "$(cap 150)" python3 tools/serving_bench.py --out "$OUT/serving" --rows "${ROWS:-^s0}" \
    --budget "${BUDGET_S:-0.15}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
  cat "$OUT/serving/serving.txt" 2>/dev/null | cut -c1-150 || tail -5 "$OUT/serving.log"
}
R0=KSEEK_FA3_MIXED_RESERVE=-1                          # the probe build, reserve 0: one stream
W2=KSEEK_FA3_MIXED_RESERVE=-1,KSEEK_FA3_DECODE_WIDE=2  # the variant: one stream, packed grids <= 2 CTAs/SM wide
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  probe)
    log "host profile"; timeout -k 5 "$(cap 120)" python3 tools/host_profile.py --rows "${HOST_ROWS:-append_rotary_prefill|varlen_q_dense}" \
      --reps 300 --top 25 > "$OUT/host_profile.txt" 2>&1; grep -E "us/call" "$OUT/host_profile.txt"
    log "reserve sweep"; KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 timeout -k 5 "$(cap 300)" \
      python3 tools/mixed_overlap_probe.py "${ROWS:-^s0|varlen_q_dense|varlen_q_paged\$|append_plain_varlen}" "${RESERVES:-0,1,8,20,40}" \
      > "$OUT/reserve_sweep.txt" 2>&1; grep -v "^  " "$OUT/reserve_sweep.txt" | cut -c1-150
    ;;
  probe2)  # the mixed decode's split count (PROBE_SPLITS) at three reserves, the one-stream step kernels, the append
           # rows' host / per-call / graph time with the append and without it, alternately
    log "splits sweep"; PROBE_SPLITS=${PROBE_SPLITS:-0,16,24,32,47,64} KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 \
      timeout -k 5 "$(cap 200)" python3 tools/mixed_overlap_probe.py "${ROWS:-varlen_q_dense}" "${RESERVES:-0,1,20,40}" \
      > "$OUT/splits_sweep.txt" 2>&1; grep -v "^  " "$OUT/splits_sweep.txt" | cut -c1-150
    log "step kernels, one stream"; KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 timeout -k 5 "$(cap 90)" \
      python3 tools/step_kernels.py --fa3api varlen_q_dense > "$OUT/step_kernels_r0.txt" 2>&1
    grep -v Warn "$OUT/step_kernels_r0.txt" | cut -c1-130 | head -20
    log "append cost"; timeout -k 5 "$(cap 150)" python3 tools/append_cost.py > "$OUT/append_cost.txt" 2>&1
    grep medians "$OUT/append_cost.txt"
    ;;
  steps)   # varlen_q_dense kernel by kernel at several num_splits, one stream (probe build, reserve 0) and reserve 20
    for r in 0 20; do
      log "step kernels reserve $r"; STEP_NUM_SPLITS=${STEP_NUM_SPLITS:-0,3,8,16,32} KSEEK_ATTENTION_DEFINES=$([ $r = 0 ] && echo KSEEK_FA3_MIXED_RESERVE=-1) \
        timeout -k 5 "$(cap 120)" python3 tools/step_kernels.py --fa3api varlen_q_dense > "$OUT/steps_r$r.txt" 2>&1
      grep -v Warn "$OUT/steps_r$r.txt" | grep -v _warn | cut -c1-110 | head -40
    done
    ;;
  final)   # the one-allocation pair: the fast-path and attention GPU tests, the append rows' cost, varlen_q_dense's
           # kernels at several num_splits on one stream, the fa3api grid
    log "GPU tests"; timeout -k 5 "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_fastpath_gpu.py \
      tests/gpu/test_attention_api_gpu.py tests/gpu/test_fa3api_gpu.py > "$OUT/gputests.txt" 2>&1
    tail -30 "$OUT/gputests.txt" | grep -E "passed|failed|Error|assert" | head -12
    log "append cost"; timeout -k 5 "$(cap 100)" python3 tools/append_cost.py > "$OUT/append_cost.txt" 2>&1
    grep medians "$OUT/append_cost.txt"
    log "step kernels"; STEP_NUM_SPLITS=${STEP_NUM_SPLITS:-0,8,16,32} KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 \
      timeout -k 5 "$(cap 100)" python3 tools/step_kernels.py --fa3api varlen_q_dense > "$OUT/steps_r0.txt" 2>&1
    grep -v Warn "$OUT/steps_r0.txt" | grep -v _warn | cut -c1-110 | head -40
    log "fa3api grid"; timeout -k 5 "$(cap 90)" python3 tools/fa3api_grid.py --reps 20 --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1
    grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
    ;;
  ab24)    # v24b (a packed-query decode CTA walks its row tiles): the decode GPU tests, varlen_q_dense's kernels on one
           # stream and at the default reserve, the fa3api grid, serving s01-s09, hopper correctness
    gputests 200 tests/gpu/test_decode_wide_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py
    log "step kernels"; vqd_steps r0 $R0; vqd_steps r20
    grid ""
    serving
    hopper
    ;;
  ncu)     # varlen_q_dense's decode part on one stream (the probe build at reserve 0): Nsight Compute's details and
           # source page of the split kernel, then its kernels at several num_splits
    export KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1
    python3 tools/vqd_call.py varlen_q_dense 2 > /dev/null 2>&1   # build / load once outside ncu
    log "ncu details"; timeout -k 5 "$(cap 90)" ncu --kernel-name-base demangled --kernel-name regex:splitkv_kernel --launch-skip 2 \
      --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
      --section Occupancy --section SchedulerStats python3 tools/vqd_call.py > "$OUT/ncu_details.txt" 2> "$OUT/ncu_details.err"
    grep -E "Duration|Throughput|Achieved|Theoretical Occ|Registers|Block Limit|Stall|Issued Warp|No Eligible|Active Warps|Eligible Warps|Grid Size|L2 Hit|DRAM|Waves" "$OUT/ncu_details.txt" | head -50
    log "ncu source"; timeout -k 5 "$(cap 90)" ncu --kernel-name-base demangled --kernel-name regex:splitkv_kernel --launch-skip 2 \
      --launch-count 1 --section WarpStateStats --section SourceCounters --import-source yes --page source --print-source sass \
      --csv python3 tools/vqd_call.py > "$OUT/ncu_src.csv" 2> "$OUT/ncu_src.err"
    python3 tools/ncu_source_stalls.py "$OUT/ncu_src.csv" --top 20 2>&1 | head -45
    log "step kernels by splits"; STEP_NUM_SPLITS=0,8,16 timeout -k 5 "$(cap 90)" python3 tools/step_kernels.py --fa3api varlen_q_dense \
      > "$OUT/steps_splits.txt" 2>&1; grep -v Warn "$OUT/steps_splits.txt" | grep -v _warn | cut -c1-110 | head -24
    ;;
  final24) # the session's last kernels (v24b, one call site): the decode / fast-path / attention GPU tests, hopper
           # correctness, varlen_q_dense's kernels (one stream and the default reserve), the fa3api grid, serving
           # s01-s09, FA3's kvcache tests with a short deadline, then Nsight Compute's details of the split kernel
    gputests 150 tests/gpu/test_decode_wide_gpu.py tests/gpu/test_fa3api_gpu.py tests/gpu/test_attention_api_gpu.py \
      tests/gpu/test_fastpath_gpu.py
    hopper
    log "step kernels"; vqd_steps r0 $R0; vqd_steps r20; vqd_steps r0_wide2 $W2
    grid ""
    grid _wide2 varlen $W2
    serving
    log "FA3 kvcache tests"; OUT=$OUT/fa3tests SKIP_GRID=1 BUDGET_S=${FA3_S:-130} FA3_GROUPS="test_flash_attn_kvcache" \
      bash tools/gpu_fa3api.sh > "$OUT/fa3tests.log" 2>&1
    tail -8 "$OUT/fa3tests.log" | cut -c1-160
    log "ncu details"; export KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1
    timeout -k 5 "$(cap 70)" ncu --kernel-name-base demangled --kernel-name regex:splitkv_kernel --launch-skip 2 \
      --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
      --section Occupancy --section SchedulerStats python3 tools/vqd_call.py > "$OUT/ncu_details.txt" 2> "$OUT/ncu_details.err"
    grep -E "Duration|Throughput|Achieved|Theoretical Occ|Registers|Block Limit|Stall|Issued Warp|No Eligible|Active Warps|Eligible Warps|Grid Size|L2 Hit|DRAM|Waves" "$OUT/ncu_details.txt" | head -50
    ;;
  decode)  # every 16-bit split kernel's SASS changed (v24b): bench26's paged decode rows 20-24 against FA3, per call and graph
    log "bench26 decode rows"; timeout -k 5 "$(cap 120)" python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs" \
      --grid bench26 --scenarios 20-24 --baseline fa3 --graph --budget 0.15 > "$OUT/bench26_decode.txt" 2>&1
    grep -E "^ *[0-9]+ |geomean|correct" "$OUT/bench26_decode.txt" | cut -c1-150
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log "done"
