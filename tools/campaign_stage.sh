#!/usr/bin/env bash
# What a campaign needs on the GPU machine that its image lacks (issue 23): the API client, papermill
# and a Jupyter kernel, Dask, pyelftools and pandas, as cp312 manylinux wheels carried in one folder.
#   bash tools/campaign_stage.sh prepare   here: download the pinned wheels and their dependencies into
#                                          .campaign-wheels/ (git-ignored, ~30 MB: one carry, beside the
#                                          ~18 MB repository and tools/bin/bwrap)
#   bash tools/campaign_stage.sh stage     on the GPU machine (carry .campaign-wheels): unpack into $SITE
#                                          every wheel whose distribution the image lacks (or has older),
#                                          then print, module by module, what imports (a missing one
#                                          says MISSING and why), and check the carried bwrap
#   source <(bash tools/campaign_stage.sh env)   PYTHONPATH with $SITE first (after stage)
# Left out on purpose: numpy and torch (the image's own; kernelseek's eval needs them already),
# matplotlib and its stack (no notebook run on the GPU draws; figures are drawn later from the trace),
# debugpy, jedi and parso (optional for ipykernel and IPython, ~10 MB).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
DIR=.campaign-wheels
SITE=${KSEEK_CAMPAIGN_SITE:-/tmp/kseek-campaign-site}
PY=${PYTHON:-python3}
PINS="anthropic==2.14.0 papermill==2.7.0 nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0
      dask==2026.8.0 distributed==2026.8.0 pyelftools==0.33 pandas==3.1.1 PyYAML==6.0.3 tqdm==4.70.1"
SKIP='^(numpy|torch|matplotlib|pillow|fonttools|kiwisolver|contourpy|cycler|debugpy|jedi|parso)-'
MODULES="anthropic httpx2 httpcore2 h11 anyio sniffio idna certifi jiter pydantic pydantic_core
         typing_extensions typing_inspection annotated_types docstring_parser papermill nbclient nbformat
         jupyter_client jupyter_core ipykernel IPython zmq tornado traitlets dask distributed msgpack
         cloudpickle toolz tblib zict psutil elftools yaml tqdm pandas dateutil numpy"

case "${1:-}" in
  prepare)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    # shellcheck disable=SC2086  # PINS is a list of words
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
      -d "$tmp" $PINS || { echo "campaign_stage: pip download failed" >&2; exit 1; }
    rm -rf "$DIR" && mkdir -p "$DIR"
    for w in "$tmp"/*.whl; do
      b=$(basename "$w")
      if echo "$b" | grep -Eqi "$SKIP"; then echo "left out: $b"; else cp "$w" "$DIR/"; fi
    done
    ls "$DIR" > "$DIR/MANIFEST"
    echo "$(ls "$DIR"/*.whl | wc -l) wheels in $DIR, $(du -sh "$DIR" | cut -f1)" ;;
  stage)
    [ -d "$DIR" ] || { echo "campaign_stage: no $DIR here: run 'prepare' on the dev machine and carry $DIR"; exit 1; }
    mkdir -p "$SITE"
    "$PY" - "$DIR" "$SITE" <<'EOF'
import importlib.metadata as md, pathlib, re, sys, zipfile
src, site = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def key(v):      # a version as a tuple of numbers, good enough to compare releases
    return tuple(int(x) for x in re.findall(r"\d+", v)[:4])
took, kept = [], []
for w in sorted(src.glob("*.whl")):
    dist, ver = w.name.split("-")[:2]
    try:
        have = md.version(dist.replace("_", "-"))
    except md.PackageNotFoundError:
        have = None
    if have is not None and key(have) >= key(ver):
        kept.append(f"{dist} {have}")
        continue
    zipfile.ZipFile(w).extractall(site)
    took.append(f"{dist} {ver}" + (f" (image has {have})" if have else ""))
print(f"staged into {site}: {', '.join(took) or 'nothing'}")
print(f"the image's own (same or newer): {', '.join(kept) or 'none'}")
EOF
    echo "--- imports (PYTHONPATH=$SITE first)"
    # shellcheck disable=SC2086  # MODULES is a list of words
    PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c '
import importlib, sys
for m in sys.argv[1:]:
    try:
        mod = importlib.import_module(m)
        print("ok     ", m, getattr(mod, "__version__", ""))
    except Exception as e:
        print("MISSING", m + ":", type(e).__name__, str(e).splitlines()[0][:200])' $MODULES
    echo "--- Jupyter kernel"
    PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "from jupyter_client.kernelspec import KernelSpecManager as K; print('ok     python3 kernel:', ' '.join(K().get_kernel_spec('python3').argv))" 2>&1 | tail -1
    echo "--- bubblewrap"
    bw=${KSEEK_BWRAP:-$(command -v bwrap || echo tools/bin/bwrap)}
    if [ -x "$bw" ]; then
      echo "bwrap: $bw, $("$bw" --version 2>&1)"
      "$bw" --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc true 2>&1 \
        && echo "ok     a confined 'true' ran" || echo "MISSING bwrap cannot create its namespaces here"
      PYTHONPATH="$SITE:.${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "from kernelseek.confine import unavailable; w=unavailable(); print('ok     kernelseek.confine: bubblewrap usable' if not w else 'MISSING kernelseek.confine: '+w)" 2>&1 \
        | tail -1 | sed '/^ok /!s/^/MISSING kernelseek.confine check: /'
    else
      echo "MISSING bwrap: none on PATH and no tools/bin/bwrap (carry it)"
    fi ;;
  env)
    echo "export PYTHONPATH=$SITE:.\${PYTHONPATH:+:\$PYTHONPATH}" ;;
  *) echo "usage: bash tools/campaign_stage.sh prepare|stage|env" >&2; exit 2 ;;
esac
