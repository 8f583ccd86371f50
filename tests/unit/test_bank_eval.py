"""The questioner benchmark: the scoring on a constructed mini-benchmark with a tiny bank (answers
worked out by hand below), the shipped benchmark loads with a reason on every label, bad input is
one line naming file, situation and field, and the focus rules and trigger phrasings it added."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelseek import bank, bank_eval as E, question_focus as F, triggers as T

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

MINI_BANK = """
entries:
- {id: cl-1, text: "Is this ceiling the hardware's?", group: challenge a limit, moments: [limit_claim],
   layer: kernel, check: x, provenance: authored}
- {id: ap-1, text: "Why is the goal met?", group: agent process, moments: [limit_claim],
   layer: process, check: x, provenance: authored}
- {id: mc-1, text: "Is the timing right?", group: measurement check, moments: [limit_claim, plateau],
   layer: benchmark, check: x, provenance: authored}
- {id: gt-1, text: "Which rows lose?", group: gap triage, moments: [plateau, start],
   layer: scenarios, check: x, provenance: authored}
"""

TABLE = "{a: 0.9, b: 0.95, c: 1.1}"
MINI_BENCH = f"""
situations:
- id: limit-right
  source: constructed
  history:
    evaluations: [{{t: 0, speedups: {TABLE}}}]
    messages: [{{t: 1, text: "This is a genuine ceiling of the hardware."}}]
  expect: {{moments: [limit_claim], categories: [challenge a limit]}}
  reason: the claim is a limit; the challenge is asked first
  moved: nothing
- id: limit-second
  held_back: true
  source: constructed
  history:
    evaluations: [{{t: 0, speedups: {TABLE}}}]
    messages: [{{t: 1, text: "We hit a hard wall here."}}]
  expect: {{moments: [limit_claim], categories: [agent process]}}
  reason: a limit claim, but only agent process helps; it is asked second
  moved: nothing
- id: wrong-moment
  source: constructed
  history:
    evaluations: [{{t: 0, speedups: {TABLE}}}]
    messages: [{{t: 1, text: "There is no headroom left in this kernel."}}]
  expect: {{moments: [plateau], categories: [gap triage]}}
  reason: labelled a plateau; the limit claim fires instead
  moved: nothing
- id: quiet
  source: constructed
  history:
    evaluations: [{{t: 0, geomean: 0.5}}, {{t: 5, speedups: {TABLE}}}]
    messages: [{{t: 6, text: "Next I will try 128-key tiles."}}]
  expect: {{moments: [], categories: []}}
  reason: progress, a plan, no claim
  moved: nothing
"""


@pytest.fixture
def mini(tmp_path):
    (tmp_path / "bank").mkdir()
    (tmp_path / "bank" / "mini.yaml").write_text(MINI_BANK)
    (tmp_path / "bench.yaml").write_text(MINI_BENCH)
    entries = bank.load([tmp_path / "bank"])
    return E.load_bench([tmp_path / "bench.yaml"]), entries, tmp_path


def test_mini_benchmark_known_answers(mini):
    sits, entries, _ = mini
    res = E.evaluate(sits, entries)
    by = {o.id: o for o in res["outcomes"]}
    # limit claims aim at challenge a limit, then gap triage (none at limit_claim), then agent process
    assert by["limit-right"].fired[0] == "limit_claim" and by["limit-right"].rank == 1
    assert [q for q, _ in by["limit-right"].asked] == ["cl-1", "ap-1", "mc-1"]
    assert by["limit-second"].rank == 2
    assert not by["wrong-moment"].moment_ok and by["wrong-moment"].rank is None
    assert by["quiet"].moment_ok and by["quiet"].fired == ()
    s = res["all"]
    assert (s["should_fire"], s["quiet"]) == (3, 1)
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == pytest.approx(2 / 3)
    assert s["quiet_kept"] == 1.0
    assert s["top1"] == pytest.approx(1 / 3) and s["top3"] == pytest.approx(2 / 3)
    # fixed pick: measurement check first (the paper's most common), then agent process, challenge
    assert s["common_top1"] == 0.0 and s["common_top3"] == pytest.approx(2 / 3)
    # random: three entries in the limit pool, one helpful: 1/3 at the first pick, 1 within three
    assert s["random_top3"] == pytest.approx(2 / 3)
    assert abs(s["random_top1"] - 2 / 9) < 0.07
    # parts: limit-second is the only held-back situation
    assert res["held_back"]["situations"] == 1 and res["held_back"]["top3"] == 1.0
    assert res["tuning"]["situations"] == 3


def test_random_baseline_is_seeded_and_exact_on_trivial_pools():
    assert E.random_baseline(["a", "a"], {"a"}) == (1.0, 1.0)
    assert E.random_baseline(["b", "c"], {"a"}) == (0.0, 0.0)
    assert E.random_baseline(["a", "b", "c", "d"], {"a"}, seed=3) == E.random_baseline(
        ["a", "b", "c", "d"], {"a"}, seed=3)
    assert E.common_baseline(["gap triage", "measurement check"], {"gap triage"}) == (0.0, 1.0)


def test_shipped_benchmark_loads_and_every_label_has_a_reason():
    sits = E.load_bench()
    ids = [s.id for s in sits]
    assert sum(i.startswith("seed-") for i in ids) >= 4
    assert sum(i.startswith("ours-") for i in ids) >= 12
    assert sum(not s.moments for s in sits) >= 3                   # quiet ones
    for s in sits:
        assert len(s.reason) > 40 and s.moved and s.source, s.id
        assert set(s.categories) <= set(bank.GROUPS)
    late = {i for i in ids if i.startswith("ours-late-")}           # added after the tuning: held
    held = set(sorted(set(ids) - late)[2::3]) | late                 # every third id, fixed up front
    assert {s.id for s in sits if s.held_back} == held
    seeds = {s.id: s for s in sits}
    # the seeds' numbers, kept exactly
    g = seeds["seed-gap-triage-fallback"].history.evaluations[-1]
    assert g.geomean == pytest.approx(0.44, abs=0.005)
    assert sorted(x for x in g.speedups.values())[:4] == [0.009, 0.010, 0.011, 0.012]
    fp8 = seeds["seed-premature-fp8-decode"].history.evaluations[-1].speedups
    assert sorted(fp8.values())[:2] == [0.20, 0.34]
    assert len(seeds["seed-coverage-40of40"].rows) == 40


def test_bad_situation_is_one_line_naming_it(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text(textwrap.dedent("""
        situations:
        - id: no-reason
          source: x
          moved: y
          history: {evaluations: [{t: 0, geomean: 1.0}]}
          expect: {moments: [plateau], categories: [gap triage]}
        """))
    with pytest.raises(E.BenchError, match=r"b.yaml: no-reason: field 'reason' missing"):
        E.load_bench([f])
    f.write_text(f.read_text().replace("moved: y", "moved: y\n  reason: r").replace("gap triage", "vibes"))
    with pytest.raises(E.BenchError, match=r"no-reason: expect.categories: 'vibes'"):
        E.load_bench([f])
    r = subprocess.run([sys.executable, "-m", "kernelseek", "bank", "eval", str(f)], cwd=ROOT, env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no-reason" in r.stderr


def test_cli_eval_prints_parts_and_baselines(mini):
    _, _, tmp = mini
    r = subprocess.run([sys.executable, "-m", "kernelseek", "bank", "eval", str(tmp / "bench.yaml"),
                        "--bank", str(tmp / "bank")], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "limit-second" in r.stdout and "held" in r.stdout
    last = r.stdout.strip().splitlines()[-1].split()
    assert last[0] == "all" and last[1] == "4"


# ---- the focus rules and the phrasings the benchmark added ------------------------------------
def test_concentration_of_the_loss():
    assert F.concentration({"a": 1.2}) is None
    spread = {f"r{i}": 0.5 for i in range(10)}
    assert F.concentration(spread) == pytest.approx(0.2)
    fallback = {**{f"r{i}": 0.9 for i in range(8)}, "x": 0.01, "y": 0.01}
    assert F.concentration(fallback) > 0.9


def test_aim_completion_versus_limit():
    h = T.History([T.Evaluation(0, {"a": 0.5, "b": 1.0}, 0.7)], [])
    def claim(text):
        return F.aim(T.Moment("limit_claim", "", evidence={"sentence": text}), h).prefer_groups
    assert claim("This is a genuine ceiling.")[0] == "challenge a limit"
    assert claim("Goal met: this completes the task.")[0] == "agent process"
    assert claim("All 40 of 40 scenarios are correct, so the goal is met.")[0] == "scenario coverage"
    m = F.aim(T.Moment("plateau", ""), h)
    assert m.prefer_groups[0] == "gap triage" and m.evidence["loss_concentration"] == 1.0


@pytest.mark.parametrize("text,claims", [
    ("With S, P and O live there are not enough registers at 240 per thread.", True),
    ("Giving it its own registers ran out of shared memory.", True),
    ("No prefill row is at a hardware limit (kernelseek bounds).", False),
    ("None of the decode rows sits at a genuine ceiling yet.", False),
    ("No, this is a genuine ceiling.", True),
])
def test_limit_phrasings_from_the_benchmark(text, claims):
    assert bool(T.claims_limit(text)) is claims
