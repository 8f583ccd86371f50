#!/usr/bin/env bash
# Session 25 on the H200 (kernels/NOTES.md "v25"): issue 25's last per-call row (varlen_q_paged: a mixed call
# over a page-16 cache) taken apart. One device call per mode, each ending before TOTAL_S:
#   probe  per-call timelines (tools/call_timeline.py: where the GPU waits for the host) of the mixed and append
#          rows, host time and cProfile of varlen_q_paged, its kernels in graph replay at the default reserve and
#          on one stream (the KSEEK_FA3_MIXED_RESERVE=-1 probe build)
# carry .whl .kseek-cache .fa3 .fa3tests:  KSEEK_GIT_REV=<sha> bash tools/gpu_v25.sh probe
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-probe}
OUT=${OUT:-/tmp/v25_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, left, cap, device.txt
timeline() {  # timeline TAG ROWS [DEFINES]: per-call timelines, into $OUT/timeline_TAG.txt
  log "timeline $1"; KSEEK_ATTENTION_DEFINES=${3:-} timeout -k 5 "$(cap 120)" python3 tools/call_timeline.py "$2" --reps 12 \
    > "$OUT/timeline_$1.txt" 2>&1; grep -E "^[a-z_]+:|median" "$OUT/timeline_$1.txt" | cut -c1-230
}
steps() {     # steps TAG ROWS [DEFINES]: kernel by kernel in graph replay, into $OUT/steps_TAG.txt
  log "step kernels $1"; KSEEK_ATTENTION_DEFINES=${3:-} timeout -k 5 "$(cap 90)" python3 tools/step_kernels.py --fa3api "$2" \
    > "$OUT/steps_$1.txt" 2>&1; grep -v Warn "$OUT/steps_$1.txt" | grep -v _warn | cut -c1-120 | head -30
}
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
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log "done"
