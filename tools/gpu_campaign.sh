#!/usr/bin/env bash
# Issue 23 on the H200, in ONE device call: a scripted-model campaign end to end, its notebooks, its
# Stop hook, and the per-step report; or (`matrix`, on a two-GPU machine) the bare and bank arms at once.
#   carry: .campaign-wheels tools/bin        (prepare here first: bash tools/campaign_stage.sh prepare;
#                                             tools/bin/bwrap is the carried bubblewrap)
#   KSEEK_GIT_REV=<sha> bash tools/gpu_campaign.sh [run|matrix]
#   STAGE=0 OUT=/tmp/dry bash tools/gpu_campaign.sh     a dry run where everything is installed (no GPU:
#                                                      the evaluations error, the rest runs)
# Steps: stage the wheels (tools/campaign_stage.sh stage: imports and bwrap checked, printed);
# serve tools/scripted_model.py on 127.0.0.1; `kernelseek campaign run` (bank arm, grid e2e,
# confined; unconfined, and said so, only if bubblewrap cannot run here); the Stop hook on the same
# campaign; trace_analysis.ipynb and `kernelseek trace stats|steps` on its trace; everything packed
# into $OUT (campaign folder, trace, executed notebooks, logs). A part that cannot run prints
# FAILED with its error and the rest still runs. A short table prints last.
# Expected: ~20 s staging, ~150-250 s campaign (5-7 evaluations of ~25-35 s), ~20 s notebooks.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
MODE=${1:-run}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/bundle.sh   # everything under $OUT comes back as $OUT/bundle.tgz
STAMP=$(date -u +%Y%m%d-%H%M%S)
ID=${ID:-h200-e2e-scripted-$STAMP}
BASELINE=${BASELINE:-cudnn}          # one baseline keeps each evaluation short; `best` times three
WALL=${WALL_S:-400}                  # the campaign's wall-time budget (the call's limit is 600 s)
MODEL=scripted-e2e-1
NOTE="the model is tools/scripted_model.py: a script served on 127.0.0.1 through the fake Messages API, not a language model; its kernels are tools/scripted_kernels.py"
declare -a PARTS=()
part() { PARTS+=("$(printf '%-22s %s' "$1" "$2")"); echo "=== $1: $2 ($(date -u +%H:%M:%S))"; }
T0=$(date +%s)

main() {

# ---- 1. stage -------------------------------------------------------------------------------------
# outside /tmp, like FA4's /root/fa4: the confined worker binds $PYTHONPATH folders, and its /tmp is private
if [ -z "${KSEEK_CAMPAIGN_SITE:-}" ]; then
  if [ -w /root ]; then KSEEK_CAMPAIGN_SITE=/root/kseek-campaign-site; else KSEEK_CAMPAIGN_SITE=$PWD/.kseek-campaign-site; fi
fi
export KSEEK_CAMPAIGN_SITE
if [ "${STAGE:-1}" = 1 ]; then bash tools/campaign_stage.sh stage | tee "$OUT/stage.txt"
else echo "staging skipped (STAGE=0: a dry run where everything is installed)" > "$OUT/stage.txt"; fi
# shellcheck disable=SC1090
source <(bash tools/campaign_stage.sh env)
source tools/site.sh                                 # PYTHONPATH=., the build cache, FA3 if carried
grep -q '^MISSING' "$OUT/stage.txt" && part stage "FAILED: $(grep -c '^MISSING' "$OUT/stage.txt") missing (see stage.txt)" \
  || part stage ok
CONFINE=()
if python3 -c "from kernelseek.confine import unavailable; import sys; w=unavailable(); print(w or ''); sys.exit(1 if w else 0)" > "$OUT/bwrap.txt" 2>&1; then
  part bwrap "ok ($(tools/bin/bwrap --version 2>/dev/null || bwrap --version))"
else
  part bwrap "FAILED: $(tail -1 "$OUT/bwrap.txt"); the campaign runs --unconfined"
  CONFINE=(--unconfined)
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpus.txt"
export KSEEK_GIT_REV=${KSEEK_GIT_REV:-unknown}

# ---- 2. the scripted model ----------------------------------------------------------------------------
export ANTHROPIC_API_KEY="scripted-local-key-$RANDOM$RANDOM"   # checked by the local server only
rm -f "$OUT/.url"
python3 tools/scripted_model.py --url-file "$OUT/.url" > "$OUT/scripted_model.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do [ -s "$OUT/.url" ] && break; sleep 0.1; done
URL=$(cat "$OUT/.url" 2>/dev/null)
[ -n "$URL" ] && part server "ok $URL (pid $SERVER)" || part server "FAILED: $(tail -3 "$OUT/scripted_model.log")"

# ---- 3. the campaign(s) -------------------------------------------------------------------------------
common=(--kernel kernels/naive_fwd.cu --grid e2e --baseline "$BASELINE" --model "$MODEL" --base-url "$URL"
        --plateau-evals 1 --steps 11 --dollars 1 --wall-s "$WALL" --note "$NOTE" --campaigns-dir campaigns)
if [ "$MODE" = matrix ]; then
  python3 -m kernelseek campaign matrix "${common[@]}" "${CONFINE[@]}" --arms bare,bank --gpus 0,1 --workers 2 \
    2>&1 | tee "$OUT/matrix.txt"
  rc=${PIPESTATUS[0]}
  mapfile -t CAMPS < <(ls -d campaigns/*-bare-r0 campaigns/*-bank-r0 2>/dev/null)
else
  python3 -m kernelseek campaign run "${common[@]}" "${CONFINE[@]}" --arm bank --id "$ID" 2>&1 | tee "$OUT/campaign.txt"
  rc=${PIPESTATUS[0]}
  CAMPS=("campaigns/$ID")
fi
[ -f "${CAMPS[0]:-none}/trace.jsonl" ] && part campaign "ran (exit $rc: 1 = goal not met, as scripted)" \
  || part campaign "FAILED (exit $rc): no trace; see campaign.txt"
kill "$SERVER" 2>/dev/null

# ---- 4. the Stop hook, the notebooks, the step report ------------------------------------------------------
for C in "${CAMPS[@]}"; do
  [ -f "$C/trace.jsonl" ] || continue
  N=$(basename "$C")
  echo '{"session_id": "gpu-e2e", "hook_event_name": "Stop", "stop_hook_active": false, "cwd": "'"$PWD"'"}' \
    | KERNELSEEK_CAMPAIGN="$C" python3 -m kernelseek hook stop > "$OUT/$N.stop_hook.json" 2> "$OUT/$N.stop_hook.err" \
    && part "hook $N" "$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])) if open(sys.argv[1]).read().strip() else {}; print(d.get('decision','allow'))" "$OUT/$N.stop_hook.json")" \
    || part "hook $N" "FAILED: $(tail -1 "$OUT/$N.stop_hook.err")"
  python3 -c "
import papermill as pm, sys
pm.execute_notebook('notebooks/trace_analysis.ipynb', sys.argv[2], parameters={'traces_glob': sys.argv[1] + '/trace.jsonl'},
                    kernel_name='python3', progress_bar=False, cwd='.')" "$C" "$C/notebooks/trace_analysis.ipynb" \
    > "$OUT/$N.trace_analysis.log" 2>&1 && part "trace_analysis $N" ok \
    || part "trace_analysis $N" "FAILED: $(grep -E 'Error|error' "$OUT/$N.trace_analysis.log" | tail -1)"
  python3 -m kernelseek trace stats "$C" > "$OUT/$N.stats.txt" 2>&1 || part "stats $N" "FAILED: $(tail -1 "$OUT/$N.stats.txt")"
  python3 -m kernelseek trace steps "$C" --csv "$OUT/$N.steps.csv" --model-latency 20 > "$OUT/$N.steps.txt" 2>&1 \
    || part "steps $N" "FAILED: $(tail -1 "$OUT/$N.steps.txt")"
  cp "$C/trace.jsonl" "$OUT/$N.trace.jsonl"
done
if [ "$MODE" = matrix ] && [ "${#CAMPS[@]}" -ge 2 ]; then
  python3 -m kernelseek trace timeline "${CAMPS[@]}" > "$OUT/timeline.txt" 2>&1 || part timeline "FAILED: $(tail -1 "$OUT/timeline.txt")"
fi

# ---- 5. pack and the table ------------------------------------------------------------------------------
tar czf "$OUT/campaigns-$STAMP.tgz" "${CAMPS[@]}" 2>/dev/null && part pack "ok $(du -h "$OUT/campaigns-$STAMP.tgz" | cut -f1)" \
  || part pack FAILED
echo
echo "================ gpu_campaign ($MODE) $(($(date +%s) - T0)) s ================"
python3 - "${CAMPS[@]}" <<'EOF' 2>&1 || echo "(the table could not be printed)"
import json, sys, platform
from pathlib import Path
from kernelseek import traces, step_times as S
import torch
print(f"python {platform.python_version()}  torch {torch.__version__}  git {__import__('os').environ.get('KSEEK_GIT_REV')}")
for c in map(Path, sys.argv[1:]):
    if not (c / "trace.jsonl").is_file():
        continue
    ev = traces.read(c / "trace.jsonl")
    start = next((e for e in ev if e["type"] == "start"), {})
    print(f"\n{c.name}: model {start.get('model')}  confined {start.get('confined')}  sandbox: {str(start.get('sandbox'))[:60]}")
    et = S.eval_times(ev, c)
    st = S.step_times(ev, c)
    tag, last = {}, "?"
    for e in ev:
        if e["type"] == "message" and e.get("role") == "assistant":
            t = traces.text_of(e["content"])
            last = t.rsplit("[scripted step ", 1)[-1].split("]")[0] if "[scripted step " in t else "?"
        if e["type"] == "evaluation":
            tag[e["n"]] = last
    print(f"{'eval':>4} {'step':<10} {'pass':>5} {'geomean':>9} {'wall':>6} {'build':>6} {'wstart':>6} {'check':>6} {'time':>6} {'loop/step':>9}")
    for _, r in et.iterrows():
        s = st[st["eval_n"] == r["n"]]
        loop = float(s["loop_s"].iloc[0]) if len(s) else float("nan")
        f = lambda v: f"{v:6.1f}" if v is not None and v == v else "     -"
        gm = f"{r['geomean']:.4f}x" if r["geomean"] is not None and r["geomean"] == r["geomean"] else "n/a"
        print(f"{r['n']:>4} {tag.get(r['n'], '?'):<10} {r['passed']}/{r['scenarios']:<3} {gm:>9} {f(r['wall_s'])} "
              f"{f(r['build_s'])} {f(r['worker_start_s'])} {f(r['check_s'])} {f(r['time_s'])} {loop:9.2f}")
    qs = [e["moment"] for e in ev if e["type"] == "question"]
    print("moments fired:", ", ".join(qs) or "none", f"({len(set(qs))} of 5 kinds)")
    gc = [e for e in ev if e["type"] == "goal_check"]
    stop = next((e for e in reversed(ev) if e["type"] == "stop"), {})
    print(f"goal checks: {len(gc)} (met: {any(g['met'] for g in gc)}); stop: {stop.get('reason')}")
    print("loop overhead per step: mean %.2f s, max %.2f s; steps %d" % (st["loop_s"].mean(), st["loop_s"].max(), len(st)))
EOF
echo "--- parts"
printf '%s\n' "${PARTS[@]}"
}

main 2>&1 | tee -a "$OUT/gpu_campaign.log"
