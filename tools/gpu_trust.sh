#!/usr/bin/env bash
# Issue 20 in one call on the H200 (about 7-8 minutes): the harness refuses what it cannot trust.
#   bash tools/gpu_trust.sh            (from the repository root; export KSEEK_GIT_REV=<commit> first:
#                                       the device copy has no usable git; carry .whl/ for pyelftools)
# 1. build every kernel in the background (fa3_hopper takes ~2 minutes cold), the shims
# 2. tools/trust_probe.py: the CUPTI monitor alone (own code, cuBLAS, a renamed cubin, threads)
# 3. tests/gpu/test_adversarial_gpu.py + test_trust_gpu.py, re-recording
#    tests/adversarial/results_h200.json (every kernel its verdict; naive_fwd, fa3_hopper and the
#    honest copies passing, none flagged; graph timing on)
# 4. the defence's cost: fa3_hopper on bench26 rows 1,4,9,20,23 against cuDNN, defence on,
#    then --no-defence (wall per row, time_ms both ways, the defence's seconds per row)
# 5. the fail line: memo_host on bench26 rows 9 and 20 with --no-defence must be failed as faster
#    than the H200's datasheet peaks
# 6. if time is left: the memory read ceiling from the streaming-read kernel (kernelseek/streamread.py)
# Logs, results and run directories go to $OUT; the short table (tools/trust_table.py) prints last.
# Copy $OUT/results_h200.json to tests/adversarial/results_h200.json and commit it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
source tools/site.sh   # pyelftools from .whl/, PYTHONPATH=., KSEEK_CACHE_DIR
export KSEEK_GIT_REV=${KSEEK_GIT_REV:-unknown}
T0=$(date +%s)
END=${TRUST_BUDGET_S:-560}       # every step's timeout is cut to what is left of this (the device's limit is 600 s)
log() { echo "=== $* (+$(( $(date +%s) - T0 )) s)"; }
left() { local l=$(( END - ($(date +%s) - T0) )); local w=$1; [ "$l" -lt "$w" ] && w=$l; [ "$w" -lt 5 ] && w=5; echo "$w"; }
ks() { python3 -m kernelseek "$@"; }

log "env"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

log "build (background): kernels, shim, stream_read"
python3 - > "$OUT/build.log" 2>&1 <<'EOF' &
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from kernelseek import build as B, runcheck
print("shim", runcheck.build_shim(), flush=True)
files = [Path("kernels/fa3_hopper"), Path("kernels/naive_fwd.cu"), *sorted(Path("tests/adversarial").glob("*.cu"))]
with ThreadPoolExecutor(12) as ex:
    for f, r in zip(files, ex.map(B.build, files)):
        print(f, "ok" if r.ok else "FAILED", f"{r.seconds:.0f} s", flush=True)
        if not r.ok:
            print(r.log[-2000:])
EOF
BUILD=$!

log "probe: the run-time check alone"
timeout $(left 150) python3 tools/trust_probe.py --out "$OUT/probe.json" > "$OUT/probe.log" 2>&1; echo "probe rc=$?"
tail -7 "$OUT/probe.log"

wait $BUILD; echo "build done (+$(( $(date +%s) - T0 )) s)"; grep -c " ok " "$OUT/build.log"; grep FAILED "$OUT/build.log"

log "adversarial + trust GPU tests (re-records tests/adversarial/results_h200.json)"
KSEEK_ADVERSARIAL_OUT="$OUT/results_h200.json" timeout $(left 330) python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/gpu/test_adversarial_gpu.py tests/gpu/test_trust_gpu.py -rfEx > "$OUT/adversarial.log" 2>&1
echo "pytest rc=$?"; tail -25 "$OUT/adversarial.log"

log "defence cost: fa3_hopper, bench26 rows, defence on then off"
for mode in on off; do
  flag=""; [ "$mode" = off ] && flag="--no-defence"
  timeout $(left 80) python3 -m kernelseek eval kernels/fa3_hopper --grid bench26 --scenarios 1,4,9,20,23 \
    --baseline cudnn --no-progress --runs-dir "$OUT/runs/trust-$mode" $flag > "$OUT/cost-$mode.log" 2>&1
  echo "cost $mode rc=$?"; tail -3 "$OUT/cost-$mode.log"
done

log "fail line: memo_host without the defence"
timeout $(left 60) python3 -m kernelseek eval tests/adversarial/memo_host.cu --grid bench26 --scenarios 9,20 \
  --baseline cudnn --no-progress --no-defence --runs-dir "$OUT/runs/failline" > "$OUT/failline.log" 2>&1
echo "failline rc=$?"

log "memory read ceiling: the streaming-read kernel swept (information, not a fail line)"
[ "$(left 60)" -ge 40 ] && timeout $(left 60) python3 -c "
import json
from kernelseek.streamread import best_read_gbps
gbps, how, sweep = best_read_gbps(4, 10)
json.dump({'read_gbps': gbps, 'how': how, 'sweep': sweep}, open('$OUT/read_ceiling.json', 'w'), indent=1)
print(f'read ceiling {gbps:.0f} GB/s: {how}')" 2>&1 | tail -2

log "table"
python3 tools/trust_table.py "$OUT"
