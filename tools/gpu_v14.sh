#!/usr/bin/env bash
# v14's validation on one H200 call (session 13): the default build (PAGE_GATHER=2, DECODE_FP8=1,
# DECODE_DV=1, DECODE_SPLITS=ragged) checked on every hopper and optest row, production timed against
# FA3 per call and in graph replay, and tests/gpu/test_variants_gpu.py (the paths each variant takes).
#   here first: KSEEK_CACHE_DIR=$PWD/.kseek-cache python3 -m kernelseek build kernels/fa3_hopper
#   GPU (carry .whl .kseek-cache .fa3):  KSEEK_GIT_REV=<sha> bash tools/gpu_v14.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/v14_out}
source tools/gpu_prelude.sh   # bundle, site, carried cache, T0, log, device.txt
ev=(python3 -m kernelseek eval kernels/fa3_hopper --no-progress --runs-dir "$OUT/runs")   # (timeout runs no shell function)
log "hopper check"; timeout -k 5 "${CHECK_S:-90}" "${ev[@]}" --grid hopper --check-only > "$OUT/hopper.txt" 2>&1; grep -E '^correct' "$OUT/hopper.txt"
log "optest check"; timeout -k 5 "${CHECK_S:-90}" "${ev[@]}" --grid optest --check-only > "$OUT/optest.txt" 2>&1; grep -E '^correct' "$OUT/optest.txt"
log "production vs fa3"; timeout -k 5 "${PROD_S:-200}" "${ev[@]}" --grid production --baseline fa3 --graph > "$OUT/production.txt" 2>&1
tail -30 "$OUT/production.txt"
[ "${TESTS:-1}" = 1 ] && log "GPU tests" && timeout -k 5 "${TEST_S:-120}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_variants_gpu.py > "$OUT/gputests.txt" 2>&1
[ "${TESTS:-1}" = 1 ] && tail -3 "$OUT/gputests.txt"
log done
