#!/usr/bin/env bash
# Issue 21's last forging route in one call on the H200 (about 6-8 minutes):
#   KSEEK_GIT_REV=<commit> bash tools/gpu_forge.sh     (repository root; carry .whl/ for pyelftools,
#                                                       tools/bin/bwrap is not needed)
# 1. build every kernel in the background (fa3_hopper ~2 minutes cold)
# 2. tests/gpu/test_forge_gpu.py: forge_reply.cu and patch_python.cu with the host-code gate patched
#    out must still fail (reply protocol; "timing not corroborated"); patch_graph.cu (--graph) must
#    lose its forged graph_ms ("graph time not corroborated"); naive_fwd with --graph corroborated
#    per row, per call and in graph replay (corroboration.graph.ok, graph_speedup kept)
# 3. tests/gpu/test_adversarial_gpu.py: every adversarial kernel its verdict, now with two workers per
#    evaluation (the trusted baseline worker) and the parent's clock on every timed row; re-records
#    $OUT/results_h200.json (copy it to tests/adversarial/results_h200.json and commit it)
# Last: a short table (verdicts, and implied/claimed ratios, per call and in graph replay).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
source tools/site.sh
export KSEEK_GIT_REV=${KSEEK_GIT_REV:-unknown}
T0=$(date +%s)
END=${FORGE_BUDGET_S:-540}
log() { echo "=== $* (+$(( $(date +%s) - T0 )) s)"; }
left() { local l=$(( END - ($(date +%s) - T0) )); local w=$1; [ "$l" -lt "$w" ] && w=$l; [ "$w" -lt 5 ] && w=5; echo "$w"; }

log "env"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
log "build (background)"
python3 - > "$OUT/build.log" 2>&1 <<'PY' &
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from kernelseek import build as B, runcheck
print("shim", runcheck.build_shim(), flush=True)
files = [Path("kernels/fa3_hopper"), Path("kernels/naive_fwd.cu"), *sorted(Path("tests/adversarial").glob("*.cu"))]
with ThreadPoolExecutor(12) as ex:
    for f, r in zip(files, ex.map(B.build, files)):
        print(f, "ok" if r.ok else "FAILED", f"{r.seconds:.0f} s", flush=True)
PY
BUILD=$!

log "forge tests (gate off for the three attackers)"
KSEEK_FORGE_OUT="$OUT/forge" timeout $(left 200) python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/gpu/test_forge_gpu.py -rfEx > "$OUT/forge.log" 2>&1
echo "forge pytest rc=$?"; tail -8 "$OUT/forge.log"

wait $BUILD; log "build done"; grep -c " ok " "$OUT/build.log"; grep FAILED "$OUT/build.log"
log "adversarial GPU test (re-records results_h200.json)"
KSEEK_ADVERSARIAL_OUT="$OUT/results_h200.json" timeout $(left 400) python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/gpu/test_adversarial_gpu.py -rfEx > "$OUT/adversarial.log" 2>&1
echo "adversarial pytest rc=$?"; tail -12 "$OUT/adversarial.log"

log "table"
python3 tools/forge_table.py "$OUT"
