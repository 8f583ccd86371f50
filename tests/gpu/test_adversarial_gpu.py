"""On the GPU: every adversarial kernel (tests/adversarial/) is refused with its expected reason, and
the honest kernels pass unflagged, in one run of the real harness.

Each kernel gets one evaluate() on tests/adversarial/grid.yaml against cuDNN (KSEEK_ADV_BASELINE
to change), with a short timing budget; its rows must match the `// EXPECT:` line of its file
(tests/adversarial/expect.py has the rule). kernels/naive_fwd.cu and kernels/fa3_hopper (when
present) must pass every row, timed, with suspicious False. A `// HOLE:` kernel that slips through
today is an expected failure (xfail) naming the hole, never a pass.

Speed: all kernels are built in parallel first (evaluate then hits the build cache). Kernels whose
verdict comes before any timing (refused, fault, hang, wrong at the first check) run side by side;
the rest, whose verdicts depend on timing guards or timing itself, run one at a time, the honest
ones first. KSEEK_ADV_SERIAL=1 runs everything one at a time.

With KSEEK_ADVERSARIAL_OUT=PATH the rows of every kernel, the expectations, the verdicts and the
run's meta (GPU, driver, git revision, timings) are written there as JSON, before any assertion,
so a failing run is recorded too: {"meta": {...}, "expect": {kernel: ...}, "verdict": {kernel:
[...]}, "worker_log_tails": {kernel: str}, "kernels": {kernel: [row, ...]}}.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
ADV = REPO / "tests" / "adversarial"

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")]


def _load_expect():
    spec = importlib.util.spec_from_file_location("adversarial_expect", ADV / "expect.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


X = _load_expect()
BASELINE = os.environ.get("KSEEK_ADV_BASELINE", "cudnn")
TIMEOUT_S = 120.0        # per scenario, unless the kernel's EXPECT says otherwise (the spin: 8 s)
BUDGET_S = 0.1           # seconds of timed calls per implementation and scenario
SERIAL = os.environ.get("KSEEK_ADV_SERIAL") == "1"
GRAPH = os.environ.get("KSEEK_ADV_GRAPH", "1") == "1"   # also time CUDA-graph replay (memo_graph needs it)


def _kernels() -> list:
    out = [X.honest(REPO / "kernels" / "naive_fwd.cu")]
    fa3 = REPO / "kernels" / "fa3_hopper"   # a kernel folder
    if fa3.exists():
        out.append(X.honest(fa3))
    return out + [X.parse(p) for p in X.kernel_files()]


KERNELS = _kernels()
BY_NAME = {e.name: e for e in KERNELS}


def _clean(x):
    """JSON-safe: non-finite floats as strings, tuples as lists."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)


def _run_one(exp, runs_dir: Path) -> dict:
    from kernelseek.evaluate import evaluate
    t0 = time.perf_counter()
    try:
        here = Path.cwd().resolve() == REPO                # relative paths in the record when possible
        kernel = str(exp.path.relative_to(REPO)) if here else str(exp.path)
        grid = str(X.GRID.relative_to(REPO)) if here else str(X.GRID)
        run, rows, meta = evaluate(kernel, grid, baseline=BASELINE, scenarios=exp.scenarios,
                                   timeout_s=exp.timeout_s or TIMEOUT_S, budget_s=BUDGET_S,
                                   runs_dir=str(runs_dir), progress=False, graph=GRAPH,
                                   command=f"tests/gpu/test_adversarial_gpu.py {exp.name}")
        return {"rows": rows, "meta": meta, "run_dir": str(run), "error": None,
                "wall_s": time.perf_counter() - t0}
    except Exception as e:               # evaluate must never raise for a kernel's fault: record it
        return {"rows": [], "meta": {}, "run_dir": None, "error": f"{type(e).__name__}: {e}",
                "wall_s": time.perf_counter() - t0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    from kernelseek import build as B
    from kernelseek.evaluate import git_revision
    try:
        B.find_nvcc()
    except B.NvccNotFound as e:
        pytest.skip(str(e))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as ex:
        builds = list(ex.map(lambda e: B.build(e.path), KERNELS))      # the cache evaluate() uses
    build_s = time.perf_counter() - t0
    runs_dir = tmp_path_factory.mktemp("adversarial-runs")

    side_by_side = [] if SERIAL else [e for e in KERNELS if e.decided_before_timing]
    alone = [e for e in KERNELS if e not in side_by_side]           # honest ones come first in KERNELS
    out: dict[str, dict] = {}
    t1 = time.perf_counter()
    if side_by_side:
        with ThreadPoolExecutor(len(side_by_side)) as ex:
            for e, r in zip(side_by_side, ex.map(lambda e: _run_one(e, runs_dir), side_by_side)):
                out[e.name] = r
    side_s = time.perf_counter() - t1
    for e in alone:
        out[e.name] = _run_one(e, runs_dir)
    total_s = time.perf_counter() - t0

    verdicts = {}
    for e in KERNELS:
        r = out[e.name]
        probs = [f"evaluate raised {r['error']}"] if r["error"] else X.problems(e, r["rows"])
        if probs and not r["error"] and X.slips_through(e, r["rows"]):
            verdicts[e.name] = [f"HOLE (slips through today): {e.hole}"] + probs
        else:
            verdicts[e.name] = probs or ["as expected"]
    logs = {}                         # the worker's stderr where a verdict is not as expected
    for name, v in verdicts.items():
        log = Path(out[name]["run_dir"] or "/nonexistent") / "worker.log"
        if v != ["as expected"] and log.is_file():
            logs[name] = log.read_bytes()[-3000:].decode(errors="replace")
    env = next((r["meta"].get("env") for r in out.values() if r["meta"].get("env", {}).get("gpu")), {}) or {}
    doc = {
        "meta": {"gpu": env.get("gpu"), "driver": env.get("driver"), "cuda_runtime": env.get("cuda_runtime"),
                 "torch": env.get("torch"), "cudnn": env.get("cudnn"), "git_rev": git_revision(),
                 "started_utc": started, "grid": str(X.GRID.relative_to(REPO)), "baseline": BASELINE,
                 "budget_s": BUDGET_S, "timeout_s": TIMEOUT_S, "serial": SERIAL, "graph": GRAPH,
                 "defence": {n: r["meta"].get("defence") for n, r in out.items()},
                 "side_by_side": [e.name for e in side_by_side], "build_s": round(build_s, 1),
                 "side_by_side_s": round(side_s, 1), "wall_s": round(total_s, 1),
                 "kernel_wall_s": {n: round(r["wall_s"], 1) for n, r in out.items()},
                 "builds": {e.name: {"ok": b.ok, "cached": b.cached, "key": b.key[:16]} for e, b in zip(KERNELS, builds)},
                 "worker_env": env},
        "expect": {e.name: e.to_dict() for e in KERNELS},
        "verdict": verdicts,
        "worker_log_tails": logs,
        "kernels": {e.name: [dataclasses.asdict(row) for row in out[e.name]["rows"]] for e in KERNELS},
    }
    dest = os.environ.get("KSEEK_ADVERSARIAL_OUT")
    if dest:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(json.dumps(_clean(doc), indent=1, allow_nan=False) + "\n")
    _print_summary(out, verdicts, doc["meta"])
    return out


def _print_summary(out: dict, verdicts: dict, meta: dict) -> None:
    print(f"\nadversarial run on {meta['gpu']} ({meta['git_rev']}): build {meta['build_s']} s, "
          f"side by side {meta['side_by_side_s']} s, total {meta['wall_s']} s")
    for name, r in out.items():
        rows = r["rows"]
        st = ", ".join(f"{row.scenario}={row.status}{'(FLAGGED)' if row.suspicious else ''}" for row in rows)
        print(f"  {name:16} {r['wall_s']:6.1f} s  {st or r['error']}")
        print(f"  {'':16}          -> {verdicts[name][0][:160]}")


@pytest.mark.parametrize("name", list(BY_NAME))
def test_kernel_gets_its_expected_verdict(runs, name):
    exp, r = BY_NAME[name], runs[name]
    assert r["error"] is None, f"evaluate raised for {name}: {r['error']}"
    probs = X.problems(exp, r["rows"])
    if probs and X.slips_through(exp, r["rows"]):
        pytest.xfail(f"known hole, {name} passes today: {exp.hole}")
    assert not probs, "\n".join(probs)


def test_every_kernel_has_a_row_per_scenario(runs):
    """The run survived everything: no kernel's fault cut another's rows short."""
    from kernelseek.scenarios import load_grid, select
    grid = load_grid(X.GRID)
    for name, exp in BY_NAME.items():
        want = [s.name for s in select(grid, exp.scenarios)]
        assert [row.scenario for row in runs[name]["rows"]] == want, name


def test_a_fault_costs_only_its_worker(runs):
    """After the sticky CUDA error of the first scenario, the next one got a fresh worker."""
    r = runs["oob_read"]
    assert len(r["rows"]) >= 2 and r["meta"]["worker_restarts"] >= 1, r["meta"].get("worker_restarts")


def test_honest_kernels_were_profiled(runs):
    """The escape guard compares with the profiler's kernel time: it must have worked here."""
    for exp in KERNELS:
        if exp.honest or exp.name == "control_honest":
            for row in runs[exp.name]["rows"]:
                assert row.kernel_ms is not None and row.kernel_ms > 0, (exp.name, row.scenario, row.kernel_ms)


def test_results_file_written(runs):
    dest = os.environ.get("KSEEK_ADVERSARIAL_OUT")
    if not dest:
        pytest.skip("KSEEK_ADVERSARIAL_OUT not set: no results file requested")
    doc = json.loads(Path(dest).read_text())
    assert set(doc["kernels"]) == set(BY_NAME) and doc["meta"]["gpu"] and doc["meta"]["git_rev"]


def test_the_run_time_check_ran_and_passed_every_honest_row(runs):
    """The CUPTI monitor was on in every worker, and every honest row's own code was recognized."""
    for exp in KERNELS:
        r = runs[exp.name]
        if r["meta"].get("defence"):
            assert str(r["meta"]["defence"].get("runcheck", "")).startswith("on"), (exp.name, r["meta"]["defence"])
        if exp.honest:
            for row in r["rows"]:
                assert row.runcheck.startswith("ok"), (exp.name, row.scenario, row.runcheck, row.reason)


def test_the_hidden_blas_call_is_named(runs):
    """blas_hidden is refused before it loads: the host-code gate names the file and mapping
    imports it reads cuBLAS's symbol table with (the run-time check, which named cuBLAS's GEMM
    before the gate, stays behind it)."""
    for row in runs["blas_hidden"]["rows"]:
        assert row.status == "refused" and "host-code gate" in row.reason, row.reason
        assert "imports fopen" in row.reason or "imports open" in row.reason, row.reason


def test_every_timed_honest_row_is_corroborated_by_the_parents_clock(runs):
    """Each passed row carries the parent's walls and its verdict (corroborate.py); none failed it."""
    for exp in KERNELS:
        for row in runs[exp.name]["rows"]:
            assert "timing not corroborated" not in row.reason or not exp.honest, (exp.name, row.reason)
            if row.status == "passed" and row.time_ms:
                c = row.corroboration
                assert c.get("ok") and c.get("calls") and c.get("wall_ms") > 0, (exp.name, row.scenario, c)


def test_honest_rows_have_graph_times_when_asked(runs):
    if not GRAPH:
        pytest.skip("KSEEK_ADV_GRAPH=0")
    for exp in KERNELS:
        if exp.honest and exp.name != "fa3_hopper":
            for row in runs[exp.name]["rows"]:
                assert row.graph_ms and row.graph_ms > 0, (exp.name, row.scenario, row.graph_note)
                g = row.corroboration.get("graph") or {}       # kept only when the parent's clock agrees
                assert g.get("ok") and g.get("ratio") is not None, (exp.name, row.scenario, g)
