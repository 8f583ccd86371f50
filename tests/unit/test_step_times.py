"""Per-step wall time (kernelseek.step_times) and the two-arm matrix on a clock: a step's evaluation
split into build / worker start / check / time from its run's phases; evaluations of two campaigns
on one timeline, each on its own GPU; the matrix of the scripted model run by two Dask workers with
one (stand-in) GPU each, at the same time."""
import json
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tools"), str(REPO / "tests" / "fixtures" / "fakeapi"), str(Path(__file__).parent)]
import scripted_model  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import KEY  # noqa: E402
from test_scripted_campaign import run_campaign, version_runs  # noqa: E402

from kernelseek import step_times as S  # noqa: E402
from kernelseek import traces  # noqa: E402
from kernelseek.cli import main as cli_main  # noqa: E402

PHASES = {"build_s": 5.0, "worker_start_s": 3.0, "inputs": 0.1, "reference": 1.0, "candidate_check": 0.5,
          "baseline_check": 0.4, "timing_setup": 0.2, "timing": 4.0, "last_call_check": 0.3, "defence_verify": 0.5}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def test_each_step_splits_its_evaluation_into_build_check_time_and_the_loop(tmp_path, monkeypatch):
    import test_scripted_campaign as T
    real = T.version_runs

    def with_phases(tmp):                    # recorded runs that carry the harness's phases
        import json
        out = real(tmp)
        for d in out.values():
            f = d / "results.json"
            doc = json.loads(f.read_text())
            doc["meta"].update(phases_s=PHASES, wall_s=16.0)
            f.write_text(json.dumps(doc))
        return out
    monkeypatch.setattr(T, "version_runs", with_phases)
    with FakeAPI(scripted_model.script, key=KEY) as api:
        root, events, _, _ = run_campaign(tmp_path, api.base_url)
    steps = S.step_times(events, root)
    assert list(steps["step"]) == list(range(1, 12))
    ev = steps[steps["eval_n"].notna()]
    assert len(ev) == 5 and (steps["eval_n"].isna() == ~steps["tools"].str.contains("evaluate")).all()
    assert ev["build_s"].tolist() == [5.0] * 5 and ev["worker_start_s"].tolist() == [3.0] * 5
    # the defence's 0.5 s is spent inside `timing`: shown, never added a second time
    assert ev["check_s"].round(6).tolist() == [2.0] * 5 and ev["time_s"].round(6).tolist() == [4.5] * 5
    assert ev["defence_s"].round(6).tolist() == [0.5] * 5
    assert ev["harness_other_s"].round(6).tolist() == [1.5] * 5          # wall 16 - 14.5 in the phases
    none = steps[steps["eval_n"].isna()]
    assert (none[["build_s", "check_s", "time_s"]] == 0).all().all()
    # the parts the trace measures add up to each step's wall time
    measured = steps["model_s"] + steps["loop_s"]
    assert (measured <= steps["wall_s"] + 1e-9).all() and (steps["loop_s"] >= 0).all()
    text = S.limits(steps, model_latency_s=20)
    assert "steps per hour" in text and "With a model that answers in 20 s" in text
    assert S.step_plot(steps).axes[0].get_legend() is not None
    # the command: table, statement, figure
    fig = tmp_path / "steps.png"
    assert cli_main(["trace", "steps", str(root), "--figure", str(fig), "--csv", str(tmp_path / "s.csv")]) == 0
    assert fig.stat().st_size > 10_000 and (tmp_path / "s.csv").read_text().startswith("step,")


def _events(evals, start=0.0):
    """A trace's start event and evaluations (n, end time, seconds, GPU in a meta-less trace)."""
    evs = [{"type": "start", "t": start, "seq": 0}]
    for i, (n, t, s) in enumerate(evals, 1):
        evs.append({"type": "evaluation", "n": n, "t": t, "seconds": s, "seq": i, "summary": {}})
    return evs


def test_spans_on_one_clock_and_the_seconds_they_overlap():
    a = _events([(0, 30.0, 20.0), (1, 70.0, 20.0)], start=5.0)     # [10, 30], [50, 70]
    b = _events([(0, 40.0, 15.0), (1, 100.0, 10.0)], start=8.0)    # [25, 40], [90, 100]
    spans = S.eval_spans({"a": (a, None), "b": (b, None)})
    assert spans[["start", "end"]].values.tolist() == [[5, 25], [45, 65], [20, 35], [85, 95]]
    assert S.overlap_s(spans) == pytest.approx(5.0)                  # [25, 30] in the first clock
    assert S.overlap_s(S.eval_spans({"a": (a, None)})) == 0.0


class TogetherAPI(FakeAPI):
    """The scripted model, answering the first request of each conversation only when both of two
    conversations have sent theirs: two campaigns that do not run at the same time fail (a broken
    barrier after 120 s), so the matrix below proves it ran its cells in parallel."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.both = threading.Barrier(2, timeout=120)

    def answer(self, path, headers, raw):
        if len(json.loads(raw or b"{}").get("messages") or []) == 1:
            self.both.wait()                 # outside the server's lock: the other request gets in
        return super().answer(path, headers, raw)


def test_matrix_two_arms_two_workers_each_on_its_own_gpu_at_the_same_time(tmp_path):
    pytest.importorskip("distributed")
    pytest.importorskip("papermill")
    from kernelseek import campaign
    from kernelseek.agent import Config
    src = tmp_path / "src" / "evals"
    src.mkdir(parents=True)
    for k, d in enumerate(version_runs(tmp_path).values()):      # naive, tiled, failing, fixed, bn32
        d.rename(src / str(k))
    cfg = Config(kernel=str(REPO / "kernels" / "naive_fwd.cu"), grid="e2e", baseline="best", model="scripted-e2e-1",
                 evaluator=f"replay:{src.parent}", plateau_evals=1, note="the model is tools/scripted_model.py",
                 budget={"steps": 11, "tokens": None, "dollars": 1.0, "wall_s": 600.0})
    with TogetherAPI(scripted_model.script, key=KEY) as api:
        cfg.base_url = api.base_url
        df = campaign.matrix(cfg, arms=["bare", "bank"], replicates=1, campaigns_dir=tmp_path / "c", workers=2,
                             gpus=["0", "1"], processes=True)
    assert df["error"].isna().all() and sorted(df["gpu"]) == ["0", "1"]
    roots = {r.arm: tmp_path / "c" / r.campaign for r in df.itertuples()}
    runs = {a: (traces.read(r / "trace.jsonl"), r) for a, r in roots.items()}
    spans = S.eval_spans(runs)
    for r in df.itertuples():          # every evaluation of a campaign saw only its worker's GPU
        assert set(spans[spans["campaign"] == r.arm]["gpu"]) == {r.gpu}
    moments = {a: [e["moment"] for e in ev if e["type"] == "question"] for a, (ev, _) in runs.items()}
    assert moments["bare"] == [] and len(set(moments["bank"])) == 5
    # they ran at the same time (TogetherAPI held each first step until both had asked)
    life = {a: (ev[0]["t"], ev[-1]["t"]) for a, (ev, _) in runs.items()}
    assert min(life["bare"][1], life["bank"][1]) - max(life["bare"][0], life["bank"][0]) > 0
    fig = tmp_path / "timeline.png"
    assert cli_main(["trace", "timeline", *map(str, roots.values()), "--figure", str(fig)]) == 0
    assert fig.stat().st_size > 10_000
