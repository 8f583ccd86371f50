#!/usr/bin/env bash
# The build variants A/B'd against the default build on one machine, in as few calls as the budget allows:
# each experiment runs its rows off on on off (the run's meta build_defines tells them apart), against
# FA3 (carry .fa3: no staging), per call and in graph replay; tools/ab_table.py prints the table last
# (on/off time per row, correct on each side, the path taken). "on" is the experiment's define.
#   here first: every build in the cache that travels (KSEEK_CACHE_DIR=$PWD/.kseek-cache
#     python3 -m kernelseek build kernels/fa3_hopper [--define NAME=VALUE]), so nothing compiles there
#   GPU (carry .whl .kseek-cache .fa3):  KSEEK_GIT_REV=<sha> EXPS="warp ragged" bash tools/gpu_variants.sh
#   bash tools/gpu_variants.sh --list   the experiments, one line each (tests/unit/test_gpu_variants_list.py)
# Session 13 measured all of them but warp and bn176 and made four defaults (v14, NOTES): their experiments
# now define v13's behaviour, so "on" is the old build (a ratio above 1: v14 is faster).
# Experiments (name: define, grid, rows; NOTES names the entry with each prediction):
#   warp     KSEEK_FA3_PAGEIDS=warp         production p05-p07  (v13c: the PG producer, lane j issues box j;
#                                           v14 sends p06/p07 through the dense copy, so measure with
#                                           PAGE_GATHER=0 for the in-place producer)
#   ragged   KSEEK_FA3_DECODE_SPLITS=model  production d11-d17  (v13's split count: d17 one split; d11-d16
#                                           pass no seqused_k, so they make the same calls either way)
#   raggedh  KSEEK_FA3_DECODE_SPLITS=model  hopper decode rows that pass cache_seqlens without a fixed
#                                           split count (b8c2000lp, b1c2047)
#   bn176    KSEEK_FA3_BN=176               bench26 rows 10-12   (issue 27, row 12: fixed cost per tile)
#   keys512  KSEEK_FA3_SPLIT_KEYS=512       production d11-d17  (d17 at 0.80x FA3 graph with 8 splits of 1024
#                                           keys: 16 of 512 balance the long sequences better?)
#   fp8dec   KSEEK_FA3_DECODE_FP8=0         hopper fp8 decode rows (v13: paged fp8 decode on the naive fallback)
#   gather   KSEEK_FA3_PAGE_GATHER=0        hopper paged fp8 / page-1 / leftpad rows (v13: the naive fallback)
#   gather2  KSEEK_FA3_PAGE_GATHER=1        production p05-p07 (p06/p07 read in place by the PG producer)
#   dv       KSEEK_FA3_DECODE_DV=0          hopper bf16 hd192/Dv128 decode rows (v13: the prefill / fallback)
# Each eval is stopped at EV_S (default 110 s); BUDGET (default 0.2) is eval's --budget (s of timing per row).
# ORDER (default "off on on off") is each experiment's sequence of builds; TOTAL_S (default 540) ends the
# script before an eval that could run past it, so the bundle is still packed when the device call ends
# (session 13: a call cut at its limit brought back an empty bundle). ROWS_<name> overrides an
# experiment's rows (e.g. ROWS_fp8dec=decode_d128_fp8).
# TESTS=1: after an experiment's A/B, its GPU test in tests/gpu/test_variants_gpu.py (every row of its block
# checked on the default build, and the path each takes), where it has one (fp8dec, dv, gather, gather2).
set -uo pipefail
cd "$(dirname "$0")/.."
GATHER_ROWS=paged_d128_fp8_full_gqa8_b2q1000c1500p256_cap30,paged_d64_fp8_causal_gqa4_b4q256c1024p16_cap50
GATHER_ROWS=$GATHER_ROWS,decode_d128_fp8_page16_q1_gqa8_b2c3000s1_plain,paged_d128_bf16_full_mqa_b4q300c640p1_cap50
GATHER_ROWS=$GATHER_ROWS,paged_d128_fp16_swa511_mqa_b3q128c777p64lp_plain
exp() {   # name -> "DEFINE GRID ROWS"
  case $1 in
    warp) echo "KSEEK_FA3_PAGEIDS=warp production 5-7" ;;
    ragged) echo "KSEEK_FA3_DECODE_SPLITS=model production 11-17" ;;
    raggedh) echo "KSEEK_FA3_DECODE_SPLITS=model hopper b8c2000lp,b1c2047" ;;
    bn176) echo "KSEEK_FA3_BN=176 bench26 10-12" ;;
    keys512) echo "KSEEK_FA3_SPLIT_KEYS=512 production 11-17" ;;
    fp8dec) echo "KSEEK_FA3_DECODE_FP8=0 hopper fp8_page,fp8_contig" ;;
    gather) echo "KSEEK_FA3_PAGE_GATHER=0 hopper $GATHER_ROWS" ;;
    gather2) echo "KSEEK_FA3_PAGE_GATHER=1 production 5-7" ;;
    dv) echo "KSEEK_FA3_DECODE_DV=0 hopper decode_d192v128_bf16" ;;
    *) return 1 ;;
  esac
}
gputest() {   # name -> the -k expression of its GPU test, if any
  case $1 in
    fp8dec) echo decode_fp8 ;; dv) echo decode_dv ;; gather) echo page_gather_takes ;; gather2) echo page_gather_2 ;;
    *) return 1 ;;
  esac
}
ALL="warp ragged raggedh bn176 keys512 fp8dec gather gather2 dv"
if [ "${1:-}" = --list ]; then   # each experiment's name, define, grid and rows; nothing else runs
  for name in $ALL; do echo "$name $(exp "$name")"; done
  exit 0
fi
OUT=${OUT:-/tmp/variants_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, device.txt
RUNS=/tmp/variant_runs
for name in ${EXPS:-warp ragged bn176}; do
  spec=$(exp "$name") || { echo "unknown experiment $name ($ALL)"; continue; }
  read -r def grid rows <<< "$spec"
  ov=ROWS_$name; rows=${!ov:-$rows}
  log "$name: $def on $grid rows $rows"
  if ! python3 -m kernelseek build kernels/fa3_hopper --define "$def" > "$OUT/build_$name.txt" 2>&1; then
    echo "build failed:"; tail -5 "$OUT/build_$name.txt"; continue
  fi
  n=0
  for cfg in ${ORDER:-off on on off}; do
    n=$((n + 1)); d=(); [ $cfg = on ] && d=(--define "$def")
    if [ $(( $(date +%s) - T0 + ${EV_S:-110} )) -gt "${TOTAL_S:-540}" ]; then
      echo "  $cfg ($n): skipped, TOTAL_S=${TOTAL_S:-540} would be passed"; continue
    fi
    timeout -k 5 "${EV_S:-110}" python3 -m kernelseek eval kernels/fa3_hopper --grid "$grid" --scenarios "$rows" \
      --baseline "${BASE:-fa3}" --graph --budget "${BUDGET:-0.2}" "${d[@]}" --no-progress \
      --runs-dir "$RUNS/$name" > "$OUT/${name}_${n}_$cfg.txt" 2>&1
    rc=$?; echo "  $cfg ($n): rc=$rc (+$(( $(date +%s) - T0 )) s) $(grep -E '^correct' "$OUT/${name}_${n}_$cfg.txt" | tail -1)"
    pkill -9 -f "kernelseek.worker" 2>/dev/null
  done
  tar czf "$OUT/runs-$name.tgz" -C "$RUNS" "$name" 2>/dev/null   # what is done so far, should the call be cut
  if [ "${TESTS:-0}" = 1 ] && k=$(gputest "$name") && \
     [ $(( $(date +%s) - T0 + ${TEST_S:-240} )) -le "${TOTAL_S:-540}" ]; then
    timeout -k 5 "${TEST_S:-240}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_variants_gpu.py -k "$k" \
      > "$OUT/gputest_$name.txt" 2>&1
    echo "  GPU test ($k): rc=$? $(tail -1 "$OUT/gputest_$name.txt")"
  fi
done
log "tables"
python3 tools/ab_table.py "$RUNS" --json "$OUT/ab.json" | tee "$OUT/ab.txt"
