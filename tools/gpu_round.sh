#!/usr/bin/env bash
# One round on the H200 after a kernel change, in as few device calls as possible.
#   bash tools/gpu_round.sh probes     build the probes (tests/probes/) in parallel, run them
#                                      (correctness gate; see PROBES and PROBE_PASSES below)
#   bash tools/gpu_round.sh bench      optest + hopper checks, then bench26 twice (FA4 staged first:
#                                      three calls, ../shared/tools/fa4/README.md)
#   bash tools/gpu_round.sh ab         A/B of the v5 choices on the rows they touch, as build variants:
#                                      --define KSEEK_FA3_BN=64 (rows 13-15, 17, 26) and
#                                      --define KSEEK_FA3_ORDER=flat (prefill rows)
#   bash tools/gpu_round.sh variants   probe_fa3 timings of the kernel and two A/B builds (register
#                                      split 24/240, no rescale skip): the static path's open question
#   bash tools/gpu_round.sh fp8        bench26fp8 (fp8 TFLOP/s beside bench26's bf16 rows)
#   bash tools/gpu_round.sh gputests   the GPU tests (API, eval smoke, ceilings, adversarial)
#   KB=other.cu SCEN=rows bash tools/gpu_round.sh abfile
#                                      A/B of the kernel against another kernel file on one machine:
#                                      abn with the two files (built in parallel, then A B B A)
#   KFILES="a.cu b.cu c.cu" SCEN=rows bash tools/gpu_round.sh abn
#                                      A/B/C... of several kernel files on one machine: all built in
#                                      parallel, then run in order and in reverse (A B C C B A)
#   bash tools/gpu_round.sh pair       bench26 twice in a row (no checks; FA4 staged first)
#   DEFAB="KSEEK_FA3_BN=128" SCEN=rows bash tools/gpu_round.sh defab
#                                      one build variant (NAME=VALUE words, each a --define) on one
#                                      machine, order off on on off (the run's meta.build_defines
#                                      tells them apart; both builds are cached after the first pass)
#   WIP=<dir with fa3_hopper.patch, or the .patch> SCEN=rows bash tools/gpu_round.sh wip
#                                      a wip patch in one call: the kernel kept as fa3_hopper_base.cu
#                                      (a kernel folder: copied with its headers under kernels/base/;
#                                      its patch applies with -p1 inside the folder),
#                                      the patch applied in place, probes (default, dynamic, static)
#                                      while both build, then the harness checks and, if all pass,
#                                      abfile against the base (this device copy only);
#                                      WIP_PROBES=0 skips the probes (a host-side patch)
#   bash tools/gpu_round.sh jitter     FA4's host time per call on rows 20 and 22, per CPU and over
#                                      time (tools/host_jitter.py; issue 3)
# KERNEL: the kernel, a folder or a .cu file (default kernels/fa3_hopper).
# Logs and run directories (tarred) go to $OUT; the last lines printed are the short table.
# Export KSEEK_GIT_REV=<commit> first: the device copy has no usable git.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
source tools/site.sh  # pyelftools from .whl/ (the profile phase imports the build), FA4 if staged
A="-gencode=arch=compute_90a,code=sm_90a -O2"   # the probes' build (they include the kernel folder)
PB=${PB:-/tmp/probes}; mkdir -p "$PB"             # where probe executables go
K=${KERNEL:-kernels/fa3_hopper}
PROBES=${PROBES:-probe_fa3}  # tests/probes/<name> without .cu (e.g. PROBES="probe_fa3 probe_decode probe_fp8")
# probe_fa3's quick gate: the shipped schedule and the forced-dynamic pass, no timings (about 2 min
# with the builds); PROBE_PASSES=default,dynamic,static,var0,var1,flat and PROBE_NO_BENCH unset (env -u)
# for all. Each pass but default is a build variant of probe_fa3 (kernels/fa3_hopper/variants.cuh)
# running its (f) section only.
export PROBE_PASSES=${PROBE_PASSES-default,dynamic} PROBE_NO_BENCH=${PROBE_NO_BENCH-1}
pass_flags() {  # the -D flags of a probe_fa3 pass
  case $1 in
    dynamic) echo "-DKSEEK_FA3_SCHED=dynamic -DKSEEK_FA3_SECTION_MB=0.5" ;;  # every case through the counter
    static) echo "-DKSEEK_FA3_SCHED=static" ;;
    var0) echo "-DKSEEK_FA3_VARIANT=0" ;;
    var1) echo "-DKSEEK_FA3_VARIANT=1" ;;
    flat) echo "-DKSEEK_FA3_ORDER=flat" ;;
  esac
}
for what in "$@"; do
  case $what in
    probes)
      for p in $PROBES; do nvcc $A -o "$PB/$p" tests/probes/$p.cu > "$OUT/build_$p.txt" 2>&1 & done
      for ps in ${PROBE_PASSES//,/ }; do
        [ "$ps" = default ] || nvcc $A $(pass_flags $ps) -o "$PB/probe_fa3_$ps" tests/probes/probe_fa3.cu \
          > "$OUT/build_probe_fa3_$ps.txt" 2>&1 &
      done; wait
      ok=1
      for p in $PROBES; do
        [ "$p" = probe_fa3 ] && [[ ",$PROBE_PASSES," != *,default,* ]] && continue
        timeout 300 "$PB/$p" > "$OUT/$p.txt" 2>&1; echo "$p rc=$?"
        grep -E "FAIL|ALL PASS|FAILED|\(g|TIME|SWEEP|== |build variant" "$OUT/$p.txt" | tail -30
        grep -q "^ALL PASS: 0 failure" "$OUT/$p.txt" || ok=0
      done
      for ps in ${PROBE_PASSES//,/ }; do
        [ "$ps" = default ] && continue
        timeout 300 "$PB/probe_fa3_$ps" f > "$OUT/probe_fa3_$ps.txt" 2>&1; echo "probe_fa3 pass $ps rc=$?"
        grep -E "FAIL|ALL PASS|FAILED|build variant" "$OUT/probe_fa3_$ps.txt" | tail -12
        grep -q "^ALL PASS: 0 failure" "$OUT/probe_fa3_$ps.txt" || ok=0
      done
      if [ $ok = 1 ]; then echo "ALL PASS: 0 failure(s) (every probe and pass)"; else echo "FAILED: a probe or pass"; fi \
        | tee "$OUT/probes_verdict.txt" ;;
    variants)  # probe_fa3's (g) timings for the kernel and two probe-only build hooks (NOTES, open question)
      for v in "base:" "noskip:-DFA3_NO_RESCALE_SKIP" "regs240:-DFA3_REGS_24_240"; do
        nvcc $A ${v#*:} -o "$PB/probe_fa3_${v%%:*}" tests/probes/probe_fa3.cu > "$OUT/build_variant_${v%%:*}.txt" 2>&1 &
      done; wait
      for v in base noskip regs240; do
        env -u PROBE_NO_BENCH timeout 150 "$PB/probe_fa3_$v" f > "$OUT/variant_$v.txt" 2>&1
        echo "== $v"; grep -E "FAIL|\(g\)" "$OUT/variant_$v.txt" | tail -14
      done ;;
    bench)
      KERNEL=$K bash tools/h200.sh check bench > "$OUT/bench1.txt" 2>&1
      KERNEL=$K bash tools/h200.sh bench > "$OUT/bench2.txt" 2>&1
      grep -h "correct\|run directory" "$OUT"/bench1.txt "$OUT"/bench2.txt ;;
    ab)
      DEFINES=KSEEK_FA3_BN=64 SCEN=13-15,17,26 KERNEL=$K bash tools/h200.sh benchsel > "$OUT/ab_bn64.txt" 2>&1
      DEFINES=KSEEK_FA3_ORDER=flat SCEN=1-19,25,26 KERNEL=$K bash tools/h200.sh benchsel > "$OUT/ab_flat.txt" 2>&1
      grep -h "correct\|run directory\|build variant" "$OUT"/ab_*.txt ;;
    defab)  # one build variant A/B on one machine: without, with, with, without
      : "${DEFAB:?DEFAB=NAME=VALUE}" "${SCEN:?SCEN=rows}"
      for on in 0 1 1 0; do
        if [ $on = 1 ]; then DEFS=$DEFAB; else DEFS=; fi
        DEFINES=$DEFS SCEN=$SCEN KERNEL=$K bash tools/h200.sh benchsel >> "$OUT/defab.txt" 2>&1
      done
      grep -h "correct\|run directory\|build variant" "$OUT/defab.txt" ;;
    profile)  # Nsight Compute on rows 4 and 3 (the prefill kernel's 3rd call of each)
      for shape in "32 512 16 128 1" "1 16384 32 64 1"; do
        tag=$(echo $shape | tr ' ' _)
        timeout 240 python3 -m kernelseek profile --out "$OUT/prof_$tag" --kernel fwd_kernel --launch-skip 2 \
          -- python3 tools/one_call.py $shape 3 > "$OUT/prof_$tag.txt" 2>&1; echo "profile $tag rc=$?"
        tail -25 "$OUT/prof_$tag.txt"
      done ;;
    fp8)
      KERNEL=$K bash tools/h200.sh bench8 > "$OUT/bench_fp8.txt" 2>&1
      grep -h "correct\|run directory" "$OUT/bench_fp8.txt" ;;
    abfile)  # two files: abn's order A B B A
      KERNEL=$K KFILES="$K ${KB:?KB=file}" bash "$0" abn ;;
    abn)
      for f in ${KFILES:?KFILES=files}; do python3 -m kernelseek build "$f" > "$OUT/build_$(basename "$f" .cu).txt" 2>&1 & done; wait
      grep -l "SERIAL\|WARNING" "$OUT"/build_*.txt
      for f in $KFILES $(echo $KFILES | tr ' ' '\n' | tac); do
        SCEN=${SCEN:?SCEN=rows} KERNEL=$f bash tools/h200.sh benchsel >> "$OUT/abn.txt" 2>&1
      done
      grep -h "correct\|run directory" "$OUT/abn.txt" ;;
    pair)
      for i in 1 2; do KERNEL=$K bash tools/h200.sh bench > "$OUT/pair$i.txt" 2>&1; done
      grep -h "correct\|run directory" "$OUT"/pair?.txt ;;
    wip)
      if [ -d "$K" ]; then  # a folder: the base copied with its headers (kernel_source.copy_kernel)
        BASE=kernels/base/$(basename "$K")
        python3 -c "from kernelseek.kernel_source import copy_kernel; copy_kernel('$K', 'kernels/base')"
        PATCH=(patch -p1 -d "$K")
      else
        BASE=kernels/fa3_hopper_base.cu; cp "$K" $BASE; PATCH=(patch "$K")
      fi
      WP=${WIP:?WIP=dir or .patch}; [ -d "$WP" ] && WP=$WP/fa3_hopper.patch
      if ! "${PATCH[@]}" < "$WP" > "$OUT/wip_patch.txt" 2>&1; then
        echo "wip: the patch does not apply"; cat "$OUT/wip_patch.txt"; continue
      fi
      if [ "${WIP_PROBES:-1}" = 0 ]; then  # host-side patches: the harness checks are the gate
        echo "ALL PASS: 0 failure(s) (probes skipped: WIP_PROBES=0)" > "$OUT/probes_verdict.txt"
      else
        (PROBE_PASSES=default,dynamic,static timeout 400 bash "$0" probes > "$OUT/wip_probes.txt" 2>&1) &
      fi
      (python3 -m kernelseek build "$K" > "$OUT/build_A.txt" 2>&1 &
       python3 -m kernelseek build $BASE > "$OUT/build_B.txt" 2>&1 & wait)
      wait
      grep -E "SERIAL|WARNING" "$OUT/build_A.txt"; tail -n 4 "$OUT/wip_probes.txt" 2>/dev/null
      if grep -q "ALL PASS: 0 failure" "$OUT/probes_verdict.txt" 2>/dev/null; then
        KERNEL=$K bash tools/h200.sh check > "$OUT/wip_check.txt" 2>&1
        grep -h "correct\|run directory" "$OUT/wip_check.txt"
        if [ "$(grep -c 'correct \([0-9]*\)/\1 ' "$OUT/wip_check.txt")" = 2 ]; then
          KERNEL=$K KB=$BASE bash "$0" abfile
        else
          echo "wip: a check failed: no timing"
        fi
      else
        echo "wip: probes not clean: no checks, no timing"
      fi ;;
    jitter)
      for row in 22 20; do timeout 120 python3 tools/host_jitter.py $row 40 > "$OUT/jitter_$row.txt" 2>&1; tail -9 "$OUT/jitter_$row.txt"; done ;;
    gputests)
      KERNEL=$K bash tools/h200.sh gputests > "$OUT/gputests.txt" 2>&1
      tail -15 "$OUT/gputests.txt" ;;
    *) echo "unknown: $what" ;;
  esac
done
