"""kernelseek.store: runs and campaigns on disk, their listing, loading and the errors for bad files."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kernelseek import results, store
from kernelseek.agent.config import Paths
from kernelseek.paths import REPO

RUNS = REPO / "tests" / "fixtures" / "runs"


def _run(root: Path, name: str, rows=({"scenario": "a", "status": "passed", "speedup": 1.5},), meta=None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    store.Run(d, meta or {"kernel": "k.cu"}, list(rows), {"scenarios": len(rows)}).save()
    return d


def test_run_round_trip_and_its_parts(tmp_path):
    d = _run(tmp_path, "r1", meta={"kernel": "k.cu", "seed": 3})
    run = store.Run.load(d)
    assert run.path == d and run.meta == {"kernel": "k.cu", "seed": 3}
    assert run.rows == [{"scenario": "a", "status": "passed", "speedup": 1.5}] and run.summary == {"scenarios": 1}
    assert store.Run.load(d / "results.json").path == d           # the file works as well as the folder
    assert run.results_file == d / "results.json" and run.meta_file == d / "meta.json"
    assert (run.build_dir, run.worker_log, run.notebooks) == (d / "build", d / "worker.log", d / "notebooks")
    assert not list(d.glob("*.tmp"))                              # written atomically, nothing left over
    store.write_build(d, "nvcc ...", [{"kernel": "f", "registers": 128}])
    assert json.loads((d / "build" / "ptxas.json").read_text())[0]["registers"] == 128
    store.write_meta(d, {"seed": 3})
    assert json.loads(run.meta_file.read_text()) == {"seed": 3}
    assert store.read_meta(d) == {"kernel": "k.cu", "seed": 3}      # the record's meta is in results.json


def test_results_save_and_load_go_through_the_store(tmp_path):
    d = store.new_run_dir(tmp_path, "x")
    rows = [results.Row(scenario="a", status="passed", speedup=2.0, time_ms=1.0)]
    assert results.save(d, rows, {"grid": "g"}) == d / "results.json"
    run = store.Run.load(d)
    assert run.summary["geomean_speedup"] == 2.0 and run.rows[0]["time_ms"] == 1.0
    back, meta = results.load(d)
    assert back == rows and meta == {"grid": "g"}
    assert store.new_run_dir(tmp_path, "x") != d                  # never reuses a folder


def test_a_packed_run_reads_as_the_plain_one_and_a_new_plain_file_wins(tmp_path):
    """Committed runs keep results.json.gz (tools/pack_runs.py): every reader through the store sees the
    same document; packing is deterministic; a results.json written beside it later is what is read;
    a broken gzip file is named."""
    d = _run(tmp_path, "r1", meta={"kernel": "k.cu", "seed": 3})
    plain = (d / "results.json").read_bytes()
    before = store.read_results(d)
    gz = store.pack_results(d)
    assert gz == d / "results.json.gz" and not (d / "results.json").exists()
    assert store.results_file(d) == gz and store.is_run(d) and store.list_runs(tmp_path) == [d]
    assert store.read_results(d) == before and store.read_meta(d) == {"kernel": "k.cu", "seed": 3}
    assert store.Run.load(d).results_file == gz and results.load(d)[1]["seed"] == 3
    first = gz.read_bytes()
    (d / "results.json").write_bytes(plain)
    assert store.pack_results(d).read_bytes() == first               # same bytes: no name, no time inside
    store.Run(d, {"kernel": "k.cu", "seed": 4}, before["rows"], before["summary"]).save()
    assert store.results_file(d) == d / "results.json" and store.read_meta(d)["seed"] == 4
    assert store.list_runs(tmp_path) == [d]                         # both files: one run
    (d / "results.json").unlink()
    assert store.results_file(d / "results.json") == gz              # the path a user types still reads
    assert store.find_results(d / "results.json") == gz
    import gzip
    bad_deflate = gzip.compress(b"{}" * 1000, mtime=0)
    mid = len(bad_deflate) // 2
    for broken in (first[: len(first) // 2],                                        # truncated: EOFError
                   bad_deflate[:mid] + bytes([bad_deflate[mid] ^ 0xFF]) + bad_deflate[mid + 1:]):   # zlib.error
        gz.write_bytes(broken)
        with pytest.raises(ValueError, match="results.json.gz: not a readable gzip file"):
            store.read_results(d)


def test_a_packed_file_never_counts_as_a_campaign_evaluation(tmp_path):
    """The harness writes a campaign's evaluations plain; a results.json.gz in evals/<n>/ (or in the
    campaign's folder) is not the harness's and is not taken for an evaluation or a run there."""
    camp = tmp_path / "camp"
    _run(camp / "evals", "0")
    planted = _run(camp / "evals", "1")
    store.pack_results(planted)
    assert store.numbered_runs(camp / "evals") == [camp / "evals" / "0"]
    (camp / "results.json.gz").write_bytes((planted / "results.json.gz").read_bytes())
    assert not store.is_run(camp, packed=False) and store.is_run(camp)


@pytest.mark.parametrize("text, field", [
    ("{not json", "not valid JSON"),
    ('{"meta": {}}', "field 'rows' missing"),
    ('{"rows": {"a": 1}}', "field 'rows' must be a list"),
    ('{"rows": [{"status": "passed"}]}', "rows[0] has no field 'scenario'"),
    ('{"rows": [], "meta": [1]}', "field 'meta' must be an object"),
    ('{"rows": [], "summary": 3}', "field 'summary' must be an object"),
])
def test_bad_results_files_name_the_file_and_field(tmp_path, text, field):
    (tmp_path / "results.json").write_text(text)
    with pytest.raises(ValueError) as e:
        store.Run.load(tmp_path)
    assert str(tmp_path / "results.json") in str(e.value) and field in str(e.value)


def test_a_missing_results_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "results.json")):
        store.Run.load(tmp_path)


def test_list_runs(tmp_path):
    b, a = _run(tmp_path, "b"), _run(tmp_path, "a")
    (tmp_path / "c").mkdir()                                      # no results: not a run
    assert store.list_runs(tmp_path) == [a, b]
    assert store.list_runs(tmp_path / "nowhere") == []


def _record(c: store.Campaign, n: int) -> None:
    """The loop's ledger entry for evals/<n> (kernelseek.ledger), as Loop.run_tool writes it."""
    from kernelseek import ledger
    with open(c.trace, "a") as f:
        f.write(json.dumps({"type": "evaluation", "n": n, "dir": f"evals/{n}",
                            "results_sha256": ledger.digest(c.evals / str(n) / "results.json")}) + "\n")


def test_campaign_evaluations_one_rule(tmp_path):
    """Numbered folders with a results.json that the loop recorded in its ledger, in numeric order:
    10 after 9; a running one, a stray named folder and an unrecorded one left out; the same list
    for every caller."""
    c = store.Campaign(tmp_path)
    for n in (0, 2, 9, 10):
        _run(c.evals, str(n), rows=({"scenario": f"s{n}"},))
        _record(c, n)
    (c.evals / "11").mkdir()                                      # still running: no results yet
    _run(c.evals, "copy-of-2")                                    # not the loop's: no number
    _run(c.evals, "12")                                           # appeared: no ledger entry
    want = [c.evals / n for n in ("0", "2", "9", "10")]
    assert c.eval_dirs() == want == store.campaign_evals(tmp_path)
    assert store.numbered_runs(c.evals) == want + [c.evals / "12"]
    assert [r.rows[0]["scenario"] for r in c.evaluations()] == ["s0", "s2", "s9", "s10"]
    assert c.latest_eval() == c.evals / "10" and c.next_eval_number() == 13   # past 12
    assert store.find_results(tmp_path) == c.evals / "10" / "results.json"
    from kernelseek import goal, triage, triggers
    assert goal.find_results(tmp_path) == store.find_results(tmp_path)
    assert triage.campaign_evals(tmp_path) == want
    assert [Path(e.label).name for e in triggers.History.from_campaign(tmp_path).evaluations] == ["0", "2", "9", "10"]
    assert Paths(tmp_path).eval_dirs() == [p.resolve() for p in want]


def test_empty_and_missing_campaigns(tmp_path):
    c = store.Campaign(tmp_path / "camp")
    assert c.eval_dirs() == [] and c.latest_eval() is None and c.next_eval_number() == 0
    c.evals.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no evaluation the loop recorded"):
        store.find_results(c.root)
    with pytest.raises(FileNotFoundError, match="no such run or campaign directory"):
        store.find_results(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="config.json"):
        c.read_config()
    c.config.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"config.json: must hold a JSON object"):
        c.read_config()


def test_campaign_parts_versions_and_listing(tmp_path):
    old, new = store.Campaign(tmp_path / "old"), store.Campaign(tmp_path / "new")
    old.evals.mkdir(parents=True)
    new.root.mkdir()
    new.config.write_text(json.dumps({"kernel": "k.cu"}))
    (tmp_path / "notes").mkdir()                                  # neither evals/ nor config.json
    os.utime(old.root, (1, 1))
    assert store.list_campaigns(tmp_path) == [new.root, old.root]
    assert store.is_campaign(new.root) and not store.is_campaign(tmp_path / "notes")
    assert new.read_config() == {"kernel": "k.cu"}
    assert (new.trace, new.inbox, new.goal) == (new.root / "trace.jsonl", new.root / "inbox.jsonl",
                                                new.root / "goal.yaml")
    assert store.trace_file(new.root) == new.trace and store.trace_file(new.trace) == new.trace
    new.versions.mkdir()
    for sha in ("ab12", "ab34", "cd56"):
        new.version_file(sha).write_text("//")
    new.version_dir("ab56").mkdir()                               # a kernel kept with its headers
    (new.version_dir("ab56") / "k.cu").write_text("//")
    (new.versions / ".tmp-ab99-x").mkdir()                        # being written: not a version yet
    assert new.version_hashes("ab") == ["ab12", "ab34", "ab56"] and len(new.version_hashes()) == 4
    assert new.version_path("cd56", "k.cu") == new.versions / "cd56.cu"
    assert new.version_path("ab56", "k.cu") == new.versions / "ab56" / "k.cu"


def test_the_committed_campaign_fixture_lists_in_order(tmp_path):
    shutil.copytree(RUNS / "campaign", tmp_path / "c")
    evs = store.campaign_evals(tmp_path / "c")
    assert [p.name for p in evs] == sorted((p.name for p in evs), key=int) and len(evs) >= 2
