"""The question bank: the shipped bank lints clean and has its counts; broken fixtures fail at the
right file and line; selection fills slots, never repeats and spreads over groups."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import bank
from kernelseek.bank import GROUPS, MOMENTS, SLOTS, fill, select, values
from kernelseek.bank_lint import DUP_RATIO, construct_pattern, lint
from kernelseek.results import load as load_results

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
BANKFIX = FIX / "bank"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "kernelseek", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=60)


# ---- the shipped bank ------------------------------------------------------------------------
def test_shipped_bank_lints_clean():
    assert [str(i) for i in lint()] == []
    r = cli("bank", "lint")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 error(s)" in r.stdout


def test_shipped_bank_counts_and_groups():
    es = bank.load()
    core = [e for e in es if e.tier == "core"]
    assert len(core) >= 101
    assert {e.group for e in core} == set(GROUPS)
    assert sum(e.tier == "compare" for e in es) >= 5
    arch = [e for e in es if e.tier == "arch"]
    assert len(arch) >= 18 and {e.arch for e in arch} == {"hopper", "blackwell"}
    for m in MOMENTS:   # each moment served by several groups
        assert len({e.group for e in core if m in e.moments}) >= 3, m
    for e in es:
        assert e.text.endswith("?") and e.check and e.layer in bank.LAYERS
        assert e.provenance["kind"] in ("authored", "mined")   # nothing is confirmed without a trace
        if e.provenance["kind"] == "mined":
            assert e.provenance["source"]


def test_core_entries_name_no_construct_but_arch_entries_may():
    names = bank.read_bank()[1]
    for required in ("wgmma", "TMA", "mbarrier", "cp.async", "ldmatrix", "setmaxnreg",
                     "warp specialization", "ping-pong", "swizzle"):
        assert required in names
    pats = [construct_pattern(n) for n in names]
    es = bank.load()
    assert not [e.id for e in es if e.tier == "core" and any(p.search(e.text) for p in pats)]
    assert sum(any(p.search(e.text) for p in pats) for e in es if e.tier == "arch") >= 10


def test_construct_pattern_variants():
    assert construct_pattern("swizzle").search("a swizzled layout")
    assert construct_pattern("warp specialization").search("a warp-specialized kernel")
    assert construct_pattern("cp.async").search("use cp.async.bulk here")
    assert construct_pattern("shfl").search("a __shfl_sync call")
    assert not construct_pattern("TMA").search("automatic")


# ---- broken fixtures: every marked line errors, nothing else does ------------------------------
def _marked(path: Path) -> set[int]:
    return {i for i, line in enumerate(path.read_text().splitlines(), 1) if "# <- error" in line}


@pytest.mark.parametrize("name", sorted(p.name for p in BANKFIX.glob("broken_*.yaml")))
def test_broken_fixture_errors_at_marked_lines(name):
    path = BANKFIX / name
    issues = lint([BANKFIX / "good", path])
    assert issues, name
    assert {i.line for i in issues if Path(i.file).name == name} == _marked(path)
    assert all(Path(i.file).name == name for i in issues)


def test_broken_messages_say_what_is_wrong():
    def msgs(name):
        return " | ".join(i.message for i in lint([BANKFIX / "good", BANKFIX / name]))
    assert "not a question" in msgs("broken_not_question.yaml")
    m = msgs("broken_construct.yaml")
    assert "'warp-specialized'" in m and "'ping-pong'" in m and "ct-2" not in m   # the arch one may
    assert f">= {DUP_RATIO}" in msgs("broken_near_duplicate.yaml")
    assert "fake API" in msgs("broken_fake_trace.yaml") and "ev-404" in msgs("broken_fake_trace.yaml")
    assert "duplicate id 'g-mc'" in msgs("broken_dup_id.yaml")
    assert "unknown slot {slowest_things}" in msgs("broken_slot.yaml")
    m = msgs("broken_schema.yaml")
    for part in ("'vibes'", "'lunchtime'", "'orbit'", "field 'check'", "source", "'colour'"):
        assert part in m


def test_moment_coverage_rule():
    issues = lint([BANKFIX / "good" / "constructs.yaml", BANKFIX / "thin_moments.yaml"])
    assert len(issues) == 5 and all("served by 1 group" in i.message for i in issues)
    assert {Path(i.file).name for i in issues} == {"thin_moments.yaml"}
    assert lint([BANKFIX / "good"]) == []


def test_lint_cli_reports_file_and_line_and_fails():
    r = cli("bank", "lint", str(BANKFIX / "good"), str(BANKFIX / "broken_not_question.yaml"))
    assert r.returncode == 1
    assert re.search(r"broken_not_question\.yaml:4: error: nq-1: not a question", r.stdout)
    r = cli("bank", "lint", str(BANKFIX / "good"), str(BANKFIX / "broken_yaml.yaml"))
    assert r.returncode == 1 and "broken_yaml.yaml:6: error: YAML error" in r.stdout


def test_load_raises_with_file_and_line():
    with pytest.raises(bank.BankError, match=r"broken_schema\.yaml:3: sc-1: group .vibes."):
        bank.load([BANKFIX / "good", BANKFIX / "broken_schema.yaml"])


def test_list_cli_filters():
    r = cli("bank", "list", "--moment", "correctness_excuse", "--group", "correctness")
    assert r.returncode == 0
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("co-")]
    assert len(lines) >= 5 and all("correctness" in ln for ln in lines)


# ---- slots and selection -----------------------------------------------------------------------
def unmet_rows():
    return load_results(FIX / "runs" / "unmet")


def test_values_fill_from_results_and_bounds():
    rows, meta = unmet_rows()
    v, known = values(rows, bounds={"paged_decode": 0.58, "dense_causal": {"sol_candidate": 0.9}}, meta=meta,
                      noise=0.02)
    assert v["worst_row"] == "row 2 (paged_decode) at 0.62x"
    assert v["worst_rows"].startswith("row 2 (paged_decode) at 0.62x") and "dense_causal" in v["worst_rows"]
    assert v["failed_rows"] == "row 3 (fp8_gqa) (failed)"
    assert v["bound_fraction"] == "58% of its bound on row 2 (paged_decode)"
    assert v["geomean"] == "a geometric mean of 0.83x"
    assert v["baseline"] == "fa3" and v["gpu"] == "NVIDIA H200" and v["noise"] == "2.0%"
    assert {"worst_row", "bound_fraction", "failed_rows"} <= known


def test_absent_values_read_neutral_never_crash():
    v, known = values(None)
    assert known == set() and v == SLOTS
    for e in bank.load():
        text = fill(e.text, v)
        assert "{" not in text and "None" not in text, e.id
    assert fill("What about {nope}?", v) == "What about {nope}?"


def test_select_fills_slots_and_never_repeats():
    rows, meta = unmet_rows()
    asked, seen = [], set()
    while True:
        q = select("limit_claim", rows, meta=meta, asked=asked)
        if q is None:
            break
        assert q.id not in seen and "{" not in q.text
        seen.add(q.id)
        asked.append(q.id)
    pool = [e for e in bank.load() if "limit_claim" in e.moments and e.usable(False, "hopper")]
    assert seen == {e.id for e in pool}          # every fitting entry once, then none
    again = select("limit_claim", rows, meta=meta, asked=asked, allow_repeat=True)
    assert again is not None and again.id in seen


def test_select_prefers_groups_not_asked_recently():
    rows, meta = unmet_rows()
    asked, groups = [], []
    for _ in range(6):
        q = select("plateau", rows, meta=meta, asked=asked)
        asked.append(q.id)
        groups.append(q.group)
    assert len(set(groups)) == 6          # six questions, six different groups


def test_select_honours_the_trigger_hint_and_tiers():
    rows, meta = unmet_rows()
    q = select("suspicious_gain", rows, prefer_groups=("benchmark validity",))
    assert q.group == "benchmark validity"
    ids = {select("plateau", rows, asked=[], reference=True, seed=s).id for s in range(40)}
    assert not any(i.startswith(("hop-", "bw-")) for i in ids)     # no GPU named, no arch entries
    assert not any(i.startswith("cmp-") for i in
                   {select("plateau", rows, seed=s).id for s in range(40)})   # no reference
    bw = [e.id for e in bank.load() if e.arch == "blackwell"]
    got = set()
    for s in range(200):
        got.add(select("plateau", rows, meta={"gpu": "NVIDIA B200"}, seed=s).id)
    assert got & set(bw) and not any(i.startswith("hop-") for i in got)


def test_select_rejects_unknown_moment():
    with pytest.raises(ValueError):
        select("lunch")


def test_ask_cli():
    r = cli("bank", "ask", "limit_claim", str(FIX / "runs" / "unmet"))
    assert r.returncode == 0 and "check:" in r.stdout and "?" in r.stdout


def test_bound_fractions_accepts_the_shapes_bounds_produces():
    from kernelseek.bank import bound_fractions
    recs = [{"scenario": "a", "sol_candidate": 0.5}, {"scenario": "b", "sol_candidate": float("nan")}]
    assert bound_fractions(recs) == {"a": 0.5}
    assert bound_fractions({"a": 0.7, "b": {"fraction": 1.2}, "c": None}) == {"a": 0.7, "b": 1.2}
    pd = pytest.importorskip("pandas")
    assert bound_fractions(pd.DataFrame(recs)) == {"a": 0.5}
