# Sourced by the tools/gpu_v*.sh session scripts after tools/gpu_prelude.sh (which sets OUT, log, cap): the
# measurement steps they share, each writing under $OUT and printing a short summary.
timeline() {  # timeline TAG ROWS [DEFINES]: per-call timelines, into $OUT/timeline_TAG.txt
  log "timeline $1"; KSEEK_ATTENTION_DEFINES=${3:-} timeout -k 5 "$(cap 120)" python3 tools/call_timeline.py "$2" --reps 12 \
    > "$OUT/timeline_$1.txt" 2>&1; grep -E "^[a-z_]+:|median" "$OUT/timeline_$1.txt" | cut -c1-230
}
steps() {     # steps TAG ROWS [DEFINES]: kernel by kernel in graph replay, into $OUT/steps_TAG.txt
  log "step kernels $1"; KSEEK_ATTENTION_DEFINES=${3:-} timeout -k 5 "$(cap 90)" python3 tools/step_kernels.py --fa3api "$2" \
    > "$OUT/steps_$1.txt" 2>&1; grep -v Warn "$OUT/steps_$1.txt" | grep -v _warn | cut -c1-120 | head -30
}
grid() {      # the whole fa3api grid, into $OUT/grid.{json,txt}
  log "fa3api grid"; timeout -k 5 "$(cap 100)" python3 tools/fa3api_grid.py --reps 20 --json "$OUT/grid.json" > "$OUT/grid.txt" 2>&1
  grep -A 22 '^row ' "$OUT/grid.txt" | cut -c1-120
}
serving() {   # serving s01-s09 (ROWS) against FA3, into $OUT/serving/
  log "serving"; timeout -k 5 "$(cap 160)" python3 tools/serving_bench.py --out "$OUT/serving" --rows "${ROWS:-^s0}" \
    --budget "${BUDGET_S:-0.15}" --replays "${REPLAYS:-20}" > "$OUT/serving.log" 2>&1
  cut -c1-150 "$OUT/serving/serving.txt" 2>/dev/null || tail -5 "$OUT/serving.log"
}
hopper() {    # the hopper grid's correctness, into $OUT/hopper.txt
  log "hopper check"; timeout -k 5 "$(cap 80)" python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs" \
    --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
}
