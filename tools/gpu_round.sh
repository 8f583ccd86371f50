#!/usr/bin/env bash
# One round on the H200 after a kernel change, in as few device calls as possible.
#   bash tools/gpu_round.sh probes     build the three probes in parallel, run them (about 4 min)
#   bash tools/gpu_round.sh bench      optest + hopper checks, bench26 with the default tile order,
#                                      then with KSEEK_FA3_ORDER=section (FA4 staged first: three
#                                      calls, ../shared/tools/fa4/README.md)
#   bash tools/gpu_round.sh fp8        bench26fp8 (fp8 TFLOP/s beside bench26's bf16 rows)
#   bash tools/gpu_round.sh gputests   the GPU tests (API, eval smoke, ceilings, adversarial)
# Logs and run directories (tarred) go to $OUT; the last lines printed are the short table.
# Export KSEEK_GIT_REV=<commit> first: the device copy has no usable git.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
A="-gencode=arch=compute_90a,code=sm_90a -O2 -I.."
for what in "$@"; do
  case $what in
    probes)
      (cd kernels/probe && for p in probe_fa3 probe_decode probe_fp8; do nvcc $A -o $p $p.cu > "$OUT/build_$p.txt" 2>&1 & done; wait)
      for p in probe_fa3 probe_decode probe_fp8; do
        (cd kernels/probe && timeout 240 ./$p > "$OUT/$p.txt" 2>&1); echo "$p rc=$?"
        grep -E "FAIL|ALL PASS|FAILED|\(g|TIME|SWEEP|== " "$OUT/$p.txt" | tail -40
      done ;;
    bench)
      KERNEL=kernels/fa3_hopper.cu bash tools/h200.sh check bench > "$OUT/bench_default.txt" 2>&1
      KSEEK_FA3_ORDER=section KERNEL=kernels/fa3_hopper.cu bash tools/h200.sh bench > "$OUT/bench_section.txt" 2>&1
      grep -h "correct\|run directory" "$OUT"/bench_default.txt "$OUT"/bench_section.txt ;;
    fp8)
      KERNEL=kernels/fa3_hopper.cu bash tools/h200.sh bench8 > "$OUT/bench_fp8.txt" 2>&1
      grep -h "correct\|run directory" "$OUT/bench_fp8.txt" ;;
    gputests)
      KERNEL=kernels/fa3_hopper.cu bash tools/h200.sh gputests > "$OUT/gputests.txt" 2>&1
      tail -15 "$OUT/gputests.txt" ;;
    *) echo "unknown: $what" ;;
  esac
done
