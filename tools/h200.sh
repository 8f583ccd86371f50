#!/usr/bin/env bash
# One script for the H200 (through the device tool): build, check and time in few calls.
#   bash tools/h200.sh PHASE...   phases: env smoke check bench bench2 ceilings profile gputests
# Run directories go to runs/ and are packed into $OUT/runs-<phase>.tgz; a short table prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export KSEEK_CACHE_DIR=${KSEEK_CACHE_DIR:-/root/kseek-cache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
K=${KERNEL:-kernels/naive_fwd.cu}
ks() { python3 -m kernelseek "$@"; }
for phase in "$@"; do
  echo "=== $phase $(date -u +%H:%M:%S)"
  case $phase in
    env) nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
         python3 -c "import torch;print(torch.__version__, torch.backends.cudnn.version())" ;;
    smoke) ks eval "$K" --grid smoke --baseline best --no-progress ;;
    check) for g in optest hopper; do ks eval "$K" --grid $g --check-only --no-progress --runs-dir runs/check | tail -3; done ;;
    bench) ks eval "$K" --grid bench26 --baseline best --no-progress --runs-dir runs/bench ;;
    ceilings) ks ceilings ;;
    gputests) python3 -m pytest -q -m gpu tests/gpu -x -p no:cacheprovider 2>&1 | tail -15 ;;
    *) echo "unknown phase $phase" ;;
  esac
done
tar czf "$OUT/runs-$(date -u +%H%M%S).tgz" runs data/ceilings 2>/dev/null
ls -la "$OUT"
