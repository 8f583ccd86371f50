"""`kernelseek report RUN`: a run's notebooks, executed with papermill and rendered to HTML.

    kernelseek report runs/<id> [--compare runs/<other>] [--ceilings FILE] [--out DIR] [--no-code]

Executes notebooks/gap_triage.ipynb and notebooks/bounds.ipynb with the run as parameter into
out/report/<run name>/ under the working directory (or --out), then writes <name>.html beside each
executed <name>.ipynb. Given a campaign directory (with evals/), it reports the latest evaluation
against the one before it, into out/report/<campaign name>/. It never writes into the run or
campaign it reads (committed runs under data/runs/ stay as they are). The kernel is "python3"
(ipykernel); it finds this checkout's kernelseek through PYTHONPATH.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import store
from .paths import NOTEBOOKS, REPO

OUT = Path("out") / "report"          # under the working directory, like `kernelseek main`'s out/
REPORT_NOTEBOOKS = ("gap_triage", "bounds")
KERNEL = "python3"


def execute(name: str, params: dict, out_dir, timeout: int = 300) -> Path:
    """Run notebooks/<name>.ipynb with `params` through papermill into out_dir/<name>.ipynb."""
    import papermill as pm
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.ipynb"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([old] if old else []))
    try:
        pm.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=params,
                            kernel_name=KERNEL, cwd=str(NOTEBOOKS), progress_bar=False,
                            execution_timeout=timeout)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return out


def to_html(notebook, code: bool = True) -> Path:
    """An executed notebook as HTML beside it (with or without its code cells)."""
    import nbformat
    from nbconvert import HTMLExporter
    nb_path = Path(notebook)
    nb = nbformat.read(str(nb_path), as_version=4)
    exporter = HTMLExporter(exclude_input=not code, exclude_input_prompt=not code, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb)
    out = nb_path.with_suffix(".html")
    out.write_text(body, encoding="utf-8")
    return out


def render(run, out_dir=None, compare=None, ceilings=None, notebooks=REPORT_NOTEBOOKS,
           code: bool = True) -> list[Path]:
    """Execute and render the report notebooks for one run; returns the HTML files written."""
    run = Path(run).resolve()
    out_dir = Path(out_dir) if out_dir else OUT / (run.parent.name if run.is_file() else run.name)
    campaign = store.Campaign(run)
    if campaign.evals.is_dir():                      # a campaign: the latest evaluation vs the one before
        evs = campaign.eval_dirs()
        if not evs:
            raise FileNotFoundError(f"{run}: no evaluations under evals/")
        if compare is None and len(evs) > 1:
            run, compare = evs[-2], evs[-1]
        else:
            run = evs[-1]
    if not store.is_run(run) and not (run.is_file() and (run.suffix == ".json" or run.name == store.RESULTS_GZ)):
        raise FileNotFoundError(f"{run}: no results.json (not a run directory)")
    out_dir = out_dir.resolve()
    params = {"run": str(run), "compare": str(Path(compare).resolve()) if compare else None}
    out = []
    for name in notebooks:
        p = dict(params, out_json=str(out_dir / f"{name}.json"))   # the notebook's key values
        if name == "bounds":
            p["ceilings"] = str(Path(ceilings).resolve()) if ceilings else None
        out.append(to_html(execute(name, p, out_dir), code))
    return out
