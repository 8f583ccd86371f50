"""Campaigns: papermill runs of notebooks/campaign.ipynb, and the arm-by-replicate matrix on Dask.

    kernelseek campaign run --kernel kernels/naive_fwd.cu --grid bench26 --arm bank --steps 100
    kernelseek campaign run ... --unconfined          run the agent and its candidates without bubblewrap
    kernelseek campaign resume campaigns/<id> [--steps 200]      continue a crashed campaign
    kernelseek campaign matrix --kernel ... --arms bare,bank,human,equipped --replicates 3 --gpus 0,1,2,3
    kernelseek campaign restore campaigns/<id> 7                  put evaluation 7's kernel back
    kernelseek campaign restore campaigns/<id> 7 --fork | --rollback   ... and record a branch event
    kernelseek campaign status campaigns/<id>

`run` lays out campaigns/<id>/ (agent/config.py), then executes the notebook with papermill (its
parameters: campaign_dir, kernel, grid, baseline, arm, model, budget, replicate, ...) into
campaigns/<id>/notebooks/campaign.ipynb; the notebook drives the loop and shows the trace's
tables. `matrix` submits one such run per (arm, replicate) to a Dask distributed cluster: a
LocalCluster with one single-threaded worker per GPU (each worker pinned to one GPU through the
notebook's `gpu` parameter), or an existing scheduler (`--scheduler tcp://host:8786`; start its
workers with `CUDA_VISIBLE_DEVICES=i dask worker ADDR --nthreads 1 --resources GPU=1`).

Confinement (kernelseek.confine) is the default and needs bubblewrap: `run` refuses to start without
it. `--unconfined` is the only way around it, and the trace's start event and the outcome row say so.
The executed notebook and everything printed on stderr are redacted (kernelseek.redact).
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from pathlib import Path

from . import store
from .agent.config import ARMS, Config, create, new_campaign_id
from .paths import NOTEBOOKS, REPO

NOTEBOOK = NOTEBOOKS / "campaign.ipynb"


def parameters(cfg: Config, root: Path, gpu=None, resume: bool = False) -> dict:
    """The notebook's parameters for one campaign."""
    b = cfg.budget
    return {"campaign_dir": str(root), "kernel": cfg.kernel, "grid": cfg.grid, "baseline": cfg.baseline,
            "arm": cfg.arm, "model": cfg.model, "replicate": cfg.replicate, "budget_steps": b.get("steps"),
            "budget_tokens": b.get("tokens"), "budget_dollars": b.get("dollars"), "budget_wall_s": b.get("wall_s"),
            "evaluator": cfg.evaluator, "base_url": cfg.base_url, "gpu": gpu, "resume": resume,
            "config_json": json.dumps(cfg.to_dict())}


def outcome(root) -> dict:
    """One campaign's row: arm, replicate, why it stopped, spend, best geomean."""
    from . import traces
    from .agent.budget import Spend
    root = Path(root)
    evs = traces.read(store.Campaign(root).trace)
    cfg = next((e.get("config") for e in evs if e.get("type") == "start"), None) or {}
    stop = next((e for e in reversed(evs) if e.get("type") in ("stop", "error")), None) or {}
    gms = [e["geomean"] for e in evs if traces.passed_full(e)]     # versions that passed every row
    s = Spend.from_events(evs)
    first = next((e for e in evs if e.get("type") in ("start", "resume")), {})
    return {"campaign": root.name, "arm": cfg.get("arm"), "replicate": cfg.get("replicate"),
            "confined": first.get("confined", cfg.get("sandbox", "bwrap") != "none"),
            "stopped": stop.get("reason") or stop.get("message") or "running or crashed",
            "met": bool(stop.get("met")), "steps": s.steps, "tokens": s.tokens, "dollars": round(s.dollars, 4),
            "wall_s": round(s.wall_s, 1), "evaluations": sum(e.get("type") == "evaluation" for e in evs),
            "best_geomean": max(gms) if gms else None, "questions": sum(e.get("type") == "question" for e in evs)}


def preflight(cfg: Config) -> None:
    """Refuse, before any folder exists, what the loop would refuse: the price table and budgets,
    the API key, the evaluator spec."""
    from .agent.api import make_client
    from .agent.config import check_config
    from .agent.replay import make_evaluator
    check_config(cfg)
    make_evaluator(cfg.evaluator)
    make_client(cfg.base_url)


def run(cfg: Config, campaigns_dir="campaigns", campaign_id: str | None = None, gpu=None,
        notebook=NOTEBOOK, kernel_name: str = "python3") -> Path:
    """Create the campaign and execute its notebook; returns the campaign directory.
    A failing notebook raises papermill's PapermillExecutionError (the executed copy is kept).
    A campaign rejected before its loop started (a bad config, or a notebook failing before the
    trace's start event) leaves nothing behind, so its id can be used again."""
    import papermill as pm

    from .redact import redacting_errors, scrub_notebook
    cfg = cfg.absolute()
    if cfg.sandbox != "none":
        from .confine import require
        require("a campaign")              # refuse up front, before a campaign directory exists
    root = Path(campaigns_dir).resolve() / (campaign_id or new_campaign_id(cfg))
    preflight(cfg)
    existed = root.exists()
    try:
        paths = create(cfg, root)
        out = paths.notebooks / "campaign.ipynb"
        try:
            with redacting_errors():
                pm.execute_notebook(str(notebook), str(out), parameters=parameters(cfg, paths.root, gpu),
                                    kernel_name=kernel_name, progress_bar=False, cwd=str(REPO))
        finally:
            scrub_notebook(out)            # a second line of defence: the loop already redacts
    except BaseException:
        if not existed and not _started(root):
            shutil.rmtree(root, ignore_errors=True)
        raise
    return paths.root


def _started(root: Path) -> bool:
    """Whether the loop began (a start event in the trace): from then on the folder is a record."""
    from . import traces
    return any(e.get("type") == "start" for e in traces.read(store.Campaign(root).trace))


def _run_one(cfg_dict: dict, campaigns_dir: str, campaign_id: str, gpus: list | None, kernel_name: str) -> dict:
    """One matrix cell, on a Dask worker: the worker's GPU, the notebook, the outcome row."""
    import asyncio
    asyncio.set_event_loop(asyncio.new_event_loop())      # threaded workers must not share a loop
    gpu = None
    if gpus:
        from distributed import get_worker
        digits = re.findall(r"\d+", str(get_worker().name))
        idx = int(digits[-1]) if digits else 0
        gpu = gpus[idx % len(gpus)]
    root = Path(campaigns_dir) / campaign_id
    try:
        run(Config.from_dict(cfg_dict), campaigns_dir, campaign_id, gpu=gpu, kernel_name=kernel_name)
        err = None
    except Exception as e:  # one failed cell must not sink the matrix; its row says why
        err = f"{type(e).__name__}: {str(e)[-300:]}"
    row = outcome(root) if store.Campaign(root).trace.exists() else {"campaign": campaign_id}
    row.update(gpu=gpu, error=err, arm=cfg_dict["arm"], replicate=cfg_dict["replicate"])
    return row


def matrix(base: Config, arms=ARMS, replicates: int = 1, campaigns_dir="campaigns", scheduler: str | None = None,
           workers: int | None = None, gpus: list | None = None, processes: bool = True,
           kernel_name: str = "python3"):
    """Every (arm, replicate) campaign in parallel, one GPU each; a DataFrame of outcome rows."""
    import pandas as pd
    from distributed import Client, LocalCluster
    base = base.absolute()
    for a in arms:
        if a not in ARMS:
            raise ValueError(f"arm {a!r}: one of {', '.join(ARMS)}")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    cells = [dataclasses.replace(base, arm=a, replicate=r) for r in range(replicates) for a in arms]
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        n = workers or (len(gpus) if gpus else 1)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, resources={"GPU": 1},
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futs = [client.submit(_run_one, c.to_dict(), str(Path(campaigns_dir).resolve()),
                              f"{stamp}-{c.arm}-r{c.replicate}", gpus, kernel_name,
                              resources={"GPU": 1}, pure=False, key=f"campaign-{stamp}-{c.arm}-r{c.replicate}")
                for c in cells]
        rows = client.gather(futs)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return pd.DataFrame(rows)
