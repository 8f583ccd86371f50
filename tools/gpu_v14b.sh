#!/usr/bin/env bash
# Session 14's first calls (kernels/NOTES.md "Next session (plan)"), one mode per device call, each ending
# before TOTAL_S (default 540 s) so its bundle comes back (session 13 lost a call cut at the limit):
#   test    tests/gpu/test_variants_gpu.py -k mixed_gather: v14b (-DKSEEK_FA3_MIXED_GATHER=1) on the serving
#           rows s01-s07 against fp32, with n slots and with one slot (path "mixed_gather")
#   ab      the serving rows s01-s07 timed against FA3 twice, the default build (v14) then v14b
#           (KSEEK_ATTENTION_DEFINES), per call and in graph replay; prints both tables
#   hopper  v14 on the hopper grid's paged and decode rows against FA3, per call and graph (the rows v14
#           moved but session 13 only checked; compare with run h200-hopper-20261201-220056 per row)
# Every build prebuilt here into .kseek-cache (NOTES says which); carry .whl .kseek-cache .fa3:
#   KSEEK_GIT_REV=<sha> bash tools/gpu_v14b.sh test|ab|hopper
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
OUT=${OUT:-/tmp/v14b_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
echo "mode $mode" | tee -a "$OUT/device.txt"
case $mode in
  test)
    timeout -k 5 "$(left)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_variants_gpu.py \
      -k mixed_gather > "$OUT/gputest.txt" 2>&1
    echo "rc=$? (+$(( $(date +%s) - T0 )) s)"; tail -15 "$OUT/gputest.txt" ;;
  ab)
    for side in ${SIDES:-off on}; do
      d=""; [ $side = on ] && d=KSEEK_FA3_MIXED_GATHER=1
      budget=$(left); [ $side = off ] && [ "${SIDES:-off on}" != off ] && budget=$(( budget / 2 ))
      KSEEK_ATTENTION_DEFINES=$d timeout -k 5 "$budget" python3 tools/serving_bench.py --out "$OUT/$side" \
        --rows '^s0[1-7]' --budget "${BUDGET_S:-0.3}" --replays "${REPLAYS:-20}" > "$OUT/$side.log" 2>&1
      echo "== $side ($d): rc=$? (+$(( $(date +%s) - T0 )) s)"
      cat "$OUT/$side/serving.txt" 2>/dev/null || tail -5 "$OUT/$side.log"
    done ;;
  hopper)
    timeout -k 5 "$(left)" python3 -m kernelseek eval kernels/fa3_hopper --grid hopper --scenarios paged_,decode_ \
      --baseline fa3 --graph --budget "${BUDGET:-0.15}" --no-progress --runs-dir "$OUT/runs" > "$OUT/hopper.txt" 2>&1
    echo "rc=$? (+$(( $(date +%s) - T0 )) s)"; tail -8 "$OUT/hopper.txt" ;;
  probe)  # each row once, blocking launches, then s01 under compute-sanitizer (which launch fails, and why)
    KSEEK_ATTENTION_DEFINES=${DEFS:-KSEEK_FA3_MIXED_GATHER=1} CUDA_LAUNCH_BLOCKING=1 timeout -k 5 120 \
      python3 tools/mixed_gather_probe.py > "$OUT/probe.txt" 2>&1; echo "probe rc=$?"; cat "$OUT/probe.txt" | head -40
    KSEEK_ATTENTION_DEFINES=${DEFS:-KSEEK_FA3_MIXED_GATHER=1} timeout -k 5 "$(( $(left) - 20 ))" compute-sanitizer \
      --print-limit 5 python3 tools/mixed_gather_probe.py s01 > "$OUT/sanitizer.txt" 2>&1
    echo "sanitizer rc=$?"; grep -v "^    " "$OUT/sanitizer.txt" | head -40 ;;
  *) echo "unknown mode $mode (test, ab, hopper, probe)"; exit 2 ;;
esac
