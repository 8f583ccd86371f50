#!/usr/bin/env bash
# One script for the H200 (through the device tool): build, check and time in few calls.
#   bash tools/h200.sh PHASE...   phases: env smoke check bench bench8 benchsel (SCEN=rows) ceilings gputests
#   KERNEL=kernels/fa3_hopper DEFINES="KSEEK_FA3_BN=64" bash tools/h200.sh benchsel
#                                 KERNEL: a .cu file or a kernel folder; DEFINES: a build variant,
#                                 NAME=VALUE words passed to every eval as --define (meta build_defines)
# Run directories go to runs/ and are packed into $OUT/runs-<phase>.tgz; a short table prints last.
# The GPU image lacks pyelftools (the constraint check): carry its wheel in .whl/ (git-ignored):
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl pyelftools==0.33
# FA4 travels in three calls: ../shared/tools/fa4/README.md; then add $(cat /root/fa4/pythonpath).
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/site.sh  # pyelftools from .whl/, FA4 if staged, PYTHONPATH, the build cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
K=${KERNEL:-kernels/naive_fwd.cu}
ks() { python3 -m kernelseek "$@"; }
DEF=(); for d in ${DEFINES:-}; do DEF+=(--define "$d"); done   # a build variant, one --define per word
for phase in "$@"; do
  echo "=== $phase $(date -u +%H:%M:%S)"
  case $phase in
    env) nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
         python3 -c "import torch;print(torch.__version__, torch.backends.cudnn.version())" ;;
    smoke) ks eval "$K" ${DEF[@]+"${DEF[@]}"} --grid smoke --baseline best --no-progress ;;
    check) for g in optest hopper; do ks eval "$K" ${DEF[@]+"${DEF[@]}"} --grid $g --check-only --no-progress --runs-dir runs/check | tail -3; done ;;
    bench) ks eval "$K" ${DEF[@]+"${DEF[@]}"} --grid bench26 --baseline best --no-progress --runs-dir runs/bench ;;
    bench8) ks eval "$K" ${DEF[@]+"${DEF[@]}"} --grid bench26fp8 --baseline best --no-progress --runs-dir runs/bench ;;
    benchsel) ks eval "$K" ${DEF[@]+"${DEF[@]}"} --grid bench26 --baseline best --no-progress --runs-dir runs/bench --scenarios "${SCEN:?SCEN=rows}" ;;
    ceilings) ks ceilings ;;
    gputests) KSEEK_ADVERSARIAL_OUT=$OUT/adversarial_h200.json python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider 2>&1 | tail -15 ;;
    *) echo "unknown phase $phase" ;;
  esac
done
tar czf "$OUT/runs-$(date -u +%H%M%S).tgz" runs data/ceilings 2>/dev/null
ls -la "$OUT"
