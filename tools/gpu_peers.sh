#!/usr/bin/env bash
# Issue 24 on the H200: stage FA3 and FlashInfer, then time our kernel against `best` (cuDNN, FA3,
# FlashInfer, FA2, flash_op; FA4 too when staged) per call AND in CUDA-graph replay, on bench26 twice
# (repeatability), the production grid and the hopper grid. One phase per device call (each <= ~500 s);
# the calls must follow each other within ~30 s (a machine idle longer is released and loses the staging).
#   bash tools/gpu_peers.sh PHASE...
# Phases, in call order (carry: git-ignored paths that call needs; .whl = pyelftools for the build check):
#   stage1   carry .whl .fa3 .fi-a   FA3 unpacked (~1 s), FlashInfer's first half + deps collected
#            (stage1 again, carrying .whl .fi-d, when more prebuilt modules are kept in .fi-d/aot than fit
#            beside .fi-b and .fi-c: they are collected now and dropped in by stage2)
#   stage2   carry .whl .fi-b .fi-c  (over 64 MiB once the repository passed ~19 MB, session 11: then twice,
#                                    FI_BUILD_S=1 carrying .fi-b alone, then carrying .fi-c .whl)
#                                    FlashInfer assembled, unpacked, imported; prebuilt modules (.fi-c) dropped
#                                    in; the modules the flashinfer adapter asks for on bench26/production that .fi-c
#                                    lacks are compiled in order of use (`python3 tools/flashinfer_aot.py --list`:
#                                    FA3 hd64, hd128, hd256, FA2 hd128 for decode, FA3 window, softcap), 2 at a time on 16
#                                    cores, for at most FI_BUILD_S=470 s (tools/flashinfer_aot.py; they come back
#                                    in $OUT/fi-aot: copy them into .fi-c/aot here for the next fresh machine).
#                                    stage2 again resumes the build (ninja keeps what it compiled). Every timed
#                                    phase runs with KSEEK_FLASHINFER_JIT=0: FlashInfer declines, with the
#                                    module's name, a row whose module is not built, and compiles nothing
#   fiwarm   carry .whl              bench26 rows 7, 18, 20 against fa3,flashinfer with --graph: both checked
#                                    and captured on dense, varlen and paged decode before the long phases
#   bench    carry .whl              bench26 against best, --graph (run it in two consecutive calls: the
#                                    second call's table shows each row's move between the two runs)
#   prod     carry .whl              the production grid (kernelseek/grids/production.yaml) against best, --graph
#   hopperA  carry .whl              hopper grid, dense + varlen blocks (108 rows), --graph, budget 0.15 s, against
#                                    $HOPPER_BASE (default: every native baseline but FA4, see HB below)
#   hopperB  carry .whl              paged + decode blocks (102 rows)
#   table    (any)                   the short tables again, from every run dir still on the machine
# FA4 (optional; three more calls, ../shared/tools/fa4/README.md): phases fa4a, fa4b, fa4c carrying .fa4-a,
# .fa4-b, .fa4-c in turn, before `bench`; tools/site.sh then puts it on PYTHONPATH and `best` includes it.
# It compiles per shape (seconds each) on first use, on every grid (210 shapes on hopper): it costs device
# time well beyond its three calls, so leave it out when time is short (its numbers are in ../shared/reference).
# Session 11's full staging on a fresh machine (FA3, FlashInfer with its 6 prebuilt modules, FA4): 7 calls,
# about 2.5 minutes including the machine's start; then `fa4c fiwarm bench` in one call.
# Session 15: the tracked tree was 24 MB, so .fi-a + .fa3 passed 64 MiB: stage1 carried .whl .fi-a .kseek-cache,
# stage2 .whl .fi-b .fa3 (FI_BUILD_S=1), stage2 .whl .fi-c (FI_BUILD_S=30); 6 calls to FA4 ready, 2 min 5 s.
# Since then committed runs are gzipped (tools/pack_runs.py) and the tree is ~12 MB: stage1 can carry
# .whl .fa3 .fi-a .kseek-cache (~61 MB) and one stage2 .whl .fi-b .fi-c (~59 MB) -- arithmetic, not yet run.
# Session 12: with GRAPH_ROUNDS=4 a bench26 run takes 420-490 s (the rounds ~170 s of it), so `fa4c fiwarm
# bench` fills a 600 s call; production against best with FA4, 220 s. The 30 minutes of a session hold the
# staging, the bench pair and production, and little else.
# Each phase packs the run dirs it made into $OUT/peers-<phase>-<HHMMSS>.tgz and prints a short table last.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/site.sh      # pyelftools, FA3 (if .fa3 carried), FA4/FlashInfer (if staged), PYTHONPATH
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
K=${KERNEL:-kernels/fa3_hopper}
R=${PEERS_RUNS:-/root/peers-runs}   # outside the checkout: survives between calls on a warm machine
ks() { python3 -m kernelseek "$@"; }
# FlashInfer only where its module is built (stage2): a JIT compile inside a timed phase would eat the call
# GRAPH_ROUNDS=N: N rounds of graph replays alternating between the implementations (kernelseek eval
# --graph-rounds; session 11's bench pair moved 2 rows > 3% in graph replay without them)
# stopped at EV_S (default 540 s) so the call still packs what it made: results.json is saved after every
# row, so a stopped run keeps the rows it finished; its workers go with it
ev() { KSEEK_FLASHINFER_JIT=0 timeout -k 5 "${EV_S:-540}" python3 -m kernelseek eval "$K" --baseline "${BASE:-best}" \
         --graph --graph-rounds "${GRAPH_ROUNDS:-0}" --no-progress --runs-dir "$R/$1" "${@:2}" | tail -4
       pkill -9 -f "kernelseek.worker" 2>/dev/null; true; }
# the hopper grid's 210 shapes against every native baseline but FA4, which compiles each new shape on first
# use (seconds each: minutes of device time on this grid); HOPPER_BASE=best puts it back
HB=${HOPPER_BASE:-cudnn,fa3,flashinfer,fa2,flash_op}
# the kernel prebuilt here (KSEEK_CACHE_DIR=$PWD/.kseek-cache python3 -m kernelseek build kernels/fa3_hopper),
# when carried, seeds the machine's build cache: no compile inside a timed call
[ -d .kseek-cache ] && mkdir -p "$KSEEK_CACHE_DIR" && cp -rn .kseek-cache/. "$KSEEK_CACHE_DIR"/
pack() { tar czf "$OUT/peers-$1-$(date -u +%H%M%S).tgz" -C "$R" "$1" 2>/dev/null; }
short() {   # one line per run: what ran, the geomeans on both measures
  for d in $(ls -d "$R"/*/*/ 2>/dev/null); do
    python3 - "$d" <<'EOF'
import sys
from kernelseek import results as R
rows, meta = R.load(sys.argv[1])
s = R.summarize(rows)
ran = ",".join(f"{n}:{v['passed']}" for n, v in (meta.get("baselines_ran") or {}).items())
g = s.get("geomean_graph_speedup")
print(f"{meta.get('grid'):10} {sys.argv[1].rstrip('/').split('/')[-1][:38]:38} correct {s['passed']}/{s['scenarios']} "
      f"per-call {s['geomean_speedup'] or 0:.3f}x graph {g or 0:.3f}x ({s['graph_timed']} rows)  {ran}")
for n, whys in (meta.get("baselines_declined") or {}).items():   # why a baseline that ran elsewhere did not here
    if n in (meta.get("baselines_ran") or {}):
        for why, where in whys.items():
            print(f"    {n} declined rows {','.join(map(str, where))}: {why[:110]}")
EOF
  done
  b=($(ls -d "$R"/bench/*/ 2>/dev/null | tail -2))
  [ ${#b[@]} = 2 ] && ks triage "${b[0]}" --repeat "${b[1]}" | sed -n '/== repeatability/,$p' 
}
for phase in "$@"; do
  echo "=== $phase $(date -u +%H:%M:%S)"
  case $phase in
    stage1) nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
            python3 -c "import torch;print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
            ls /root/fa3/ 2>/dev/null; bash tools/flashinfer.sh stage ;;
    stage2) bash tools/flashinfer.sh stage && source tools/site.sh
            # the modules bench26 and production use, all at once on 16 cores (those prebuilt are skipped);
            # they come back in $OUT/fi-aot: copy them to .fi-c/aot here to carry them next time
            # in order of use (hd128 first), 2 modules at once x 8 nvcc: 16 compiles on 16 cores, within memory
            # (a CUTLASS sm90 TU takes GBs and minutes); stopped before the call's limit: stage2 again resumes
            # (ninja keeps what it built). A module not built by then is declined in the timed phases, with why.
            MAX_JOBS=8 timeout ${FI_BUILD_S:-470} python3 tools/flashinfer_aot.py "$OUT/fi-aot" --jobs=2 batch_prefill 2>&1 | grep -v INFO
            echo "flashinfer: modules built: $(ls -d /root/.cache/flashinfer/*/*/cached_ops/*/ 2>/dev/null | wc -l) in the JIT cache," \
                 "$(ls /root/flashinfer/site/flashinfer/data/aot 2>/dev/null | wc -l) prebuilt"
            ls /root/.cache/flashinfer/*/*/cached_ops 2>/dev/null | sed 's/^/jit-built: /' ;;
    fiwarm) mkdir -p "$R"; KSEEK_FLASHINFER_JIT=0 ks eval "$K" --grid bench26 --baseline fa3,flashinfer --graph \
              --graph-rounds "${GRAPH_ROUNDS:-0}" --scenarios 7,18,20 --no-progress --runs-dir "$R/fiwarm" | tail -8; pack fiwarm ;;
    bench)  ev bench --grid bench26; pack bench ;;
    prod)   ev prod --grid production --timeout 400; pack prod
            ks peers --from "$(ls -d "$R"/prod/*/ | tail -1)" --out "$OUT/peers-production.md" | sed -n '7,26p' ;;
    hopperA) BASE=$HB ev hopperA --grid hopper --scenarios dense_,varlen_ --budget 0.15; pack hopperA ;;
    hopperB) BASE=$HB ev hopperB --grid hopper --scenarios paged_,decode_ --budget 0.15; pack hopperB ;;
    fa4a|fa4b|fa4c) bash ".fa4-${phase#fa4}/stage.sh"; source tools/site.sh ;;   # optional, before bench: carry .fa4-a, -b, -c in turn; then FA4 is on PYTHONPATH
    table)  ;;
    *) echo "unknown phase $phase" ;;
  esac
done
for g in bench prod; do
  d=$(ls -d "$R"/$g/*/ 2>/dev/null | tail -1)
  [ -n "$d" ] && ks peers --from "$d" --out "$OUT/peers-$g.md" >/dev/null
done
echo "=== short table $(date -u +%H:%M:%S)"
short
ls "$OUT"
