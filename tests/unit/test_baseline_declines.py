"""Why a baseline did not run is kept: per row (Row.baselines_declined), in the run's meta
("baselines_declined": name -> {why: [rows]}), and in the peer table ("declined [n]" and the reason).
Runs recorded before the reasons were kept still load, and their peer tables are unchanged."""
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from kernelseek import evaluate as E
from kernelseek import peers as P
from kernelseek import results as R
from kernelseek.baselines import BEST_ORDER, choose, choose_why
from kernelseek.scenarios import Scenario

REPO = Path(__file__).resolve().parents[2]
OLD_RUN = REPO / "data" / "runs" / "h200-bench26-20261201-150744-fa3_hopper-v12peers"
NOT_BUILT = "FA3 prefill hd256 module not built and KSEEK_FLASHINFER_JIT=0 (...): batch_prefill_x_sm90"
PRE = Scenario(name="pre", batch=1, seqlen_q=256, seqlen_k=256, heads_q=4, heads_kv=4, head_dim=256, causal=True)


def test_every_baseline_best_tries_says_why_it_will_not_run_here():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: some baselines run")
    picked, declined = choose_why("best", PRE)
    assert picked == [] and set(declined) == set(BEST_ORDER) | {"flex"}
    assert all(isinstance(w, str) and w for w in declined.values())
    assert "tools/flashinfer.sh" in declined["flashinfer"] and "FA3 unavailable" in declined["fa3"]
    assert choose("best", PRE)[1] == [f"{n}: {w}" for n, w in declined.items()]   # the old strings, same reasons


def _reply(**declined):
    return {"status": "passed", "time_ms": 1.0, "kernel_ms": 0.9, "graph_ms": 0.9,
            "baselines": {"fa3": {"status": "passed", "version": "FA3", "time_ms": 0.9, "graph_ms": 0.8}},
            "baselines_declined": declined}


def _rows():
    return [E.make_row(dataclasses.replace(PRE, name=f"r{i}", row=i), "g",
                       _reply(flashinfer=NOT_BUILT, fa4="flash_attn.cute not importable") if i > 1 else
                       dict(_reply(fa4="flash_attn.cute not importable"), baselines={
                           **_reply()["baselines"], "flashinfer": {"status": "passed", "time_ms": 0.95}}))
            for i in (1, 2, 3)]


def test_rows_and_the_meta_keep_each_reason(tmp_path):
    rows = _rows()
    assert rows[1].baselines_declined == {"flashinfer": NOT_BUILT, "fa4": "flash_attn.cute not importable"}
    meta: dict = {"grid": "g"}
    for r in rows:
        R.note_declines(meta.setdefault("baselines_declined", {}), r)
    assert meta["baselines_declined"] == {"fa4": {"flash_attn.cute not importable": [1, 2, 3]},
                                          "flashinfer": {NOT_BUILT: [2, 3]}}
    R.save(tmp_path / "run", rows, meta)
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["rows"][2]["baselines_declined"]["flashinfer"] == NOT_BUILT
    back, m = R.load(tmp_path / "run")
    assert [r.baselines_declined for r in back] == [r.baselines_declined for r in rows]
    assert m["baselines_declined"] == meta["baselines_declined"]


def test_a_run_recorded_before_the_reasons_loads_with_none():
    rows, meta = R.load(OLD_RUN)
    assert len(rows) == 26 and all(r.baselines_declined == {} for r in rows) and "baselines_declined" not in meta
    assert "flashinfer" not in rows[12].baselines and P.declines(rows) == {}


def test_a_reason_of_the_wrong_type_is_named():
    d = dataclasses.asdict(_rows()[0])
    d["baselines_declined"] = "flashinfer: no"
    assert "baselines_declined" in R.row_problem(d)


def test_the_peer_table_shows_declines_and_their_reasons():
    rows = _rows()
    t = P.peer_table(rows, {"grid": "g", "env": {"gpu": "H200", "baselines": {"fa4": "unavailable: not staged"}}})
    head = next(ln for ln in t.splitlines() if ln.startswith("| #")).split(" | ")
    col = head.index("flashinfer")
    cells = [ln.split(" | ")[col] for ln in t.splitlines() if ln.startswith("| ") and "| r" in ln]
    assert cells == ["0.9500 / -", "declined [2]", "declined [2]"]
    assert "fa4" not in head                                      # never ran: not a column, but said below
    assert "- [1] fa4, every row: flash_attn.cute not importable" in t
    assert f"- [2] flashinfer, rows 2, 3: {NOT_BUILT}" in t
    assert "- fa4: unavailable: not staged" not in t              # said once, with its reason per row
    assert "declined [n] = did not run, for reason n below" in t
