"""The questioner's console: the notebook run headlessly by papermill, and kernelseek.widgets.Console
driven through its real ipywidgets (set a dropdown, click a button) on a copy of the recorded
campaign fixture. Asserts read console.state, the notebook's JSON and the campaign's inbox.jsonl."""
import asyncio
import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

pm = pytest.importorskip("papermill")
pytest.importorskip("ipywidgets")

from kernelseek import bank, inbox, results  # noqa: E402
from kernelseek.widgets import Console  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "campaign_small"


@pytest.fixture
def camp(tmp_path) -> Path:
    d = tmp_path / "campaigns" / "c1"
    shutil.copytree(FIXTURE, d)
    return d


@contextlib.contextmanager
def pythonpath():
    """The notebook's kernel imports this checkout's kernelseek (installed or not)."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([old] if old else []))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def inbox_lines(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "inbox.jsonl").read_text().splitlines()]


def test_console_notebook(camp, tmp_path):
    out = tmp_path / "state.json"
    with pythonpath():
        pm.execute_notebook(str(ROOT / "notebooks" / "console.ipynb"), str(tmp_path / "console.out.ipynb"),
                            kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False,
                            parameters={"campaign": str(camp), "ceilings": str(camp / "ceilings.json"),
                                        "auto_refresh": 0, "filter_moment": "plateau", "filter_group": "gap triage",
                                        "ask_bank_id": "gt-01", "ask_text": "Where does the time go outside the kernel?",
                                        "out_json": str(out)})
    st = json.loads(out.read_text())
    assert st["evals"] == 3 and st["refreshes"] == 1
    want_gm = results.summarize(results.load(camp / "evals" / "2")[0])["geomean_speedup"]
    assert st["summary"]["geomean_speedup"] == pytest.approx(want_gm)
    assert [round(t["geomean"], 4) for t in st["timeline"]] == sorted(round(t["geomean"], 4) for t in st["timeline"])
    assert {a["kind"] for a in st["alerts"]} == {"suspicious_gain", "limit_claim"}
    assert set(st["plots"]) == {"triage", "timeline", "bounds"} and min(st["plots"].values()) > 1000
    want = [e.id for e in bank.load() if "plateau" in e.moments and e.group == "gap triage" and e.usable(True, "hopper")]
    assert st["shown"] == want and "gt-01" in want
    lines = inbox_lines(camp)
    assert [(x["source"], x.get("bank_id"), x.get("moment")) for x in lines] == [
        ("console", "gt-01", "plateau"), ("console", None, None)]
    assert lines[1]["text"] == "Where does the time go outside the kernel?"
    assert len(st["pending"]) == 2 and st["errors"] == []


def test_widgets_drive_the_handlers(camp):
    c = Console(camp, ceilings=camp / "ceilings.json")
    ui = c.widget and c._ui
    ui["moment"].value = "suspicious_gain"
    ui["group"].value = "benchmark validity"
    assert c.state["filter"] == {"moment": "suspicious_gain", "group": "benchmark validity"}
    assert len(ui["bank"].children) == len(c.state["shown"]) > 0
    first = c.state["shown"][0]
    button = ui["bank"].children[0].children[0]
    assert f"ks-ask-{first}" in button._dom_classes
    button.click()                                   # the real on_click path
    ui["free"].value = "Is the window row's jump real?"
    ui["ask_free"].click()
    lines = inbox_lines(camp)
    assert [x.get("bank_id") for x in lines] == [first, None]
    assert lines[0]["moment"] == "suspicious_gain" and "{" not in lines[0]["text"]   # slots filled
    assert ui["free"].value == "" and "asked (inbox line 1)" in ui["status"].value
    assert [a["line"] for a in c.state["asked"]] == [0, 1]
    assert [p["line"] for p in inbox.pending(camp)] == [0, 1]
    # an alert's suggested question has its own Ask button
    alert_buttons = [w for w in ui["alerts"].children if "ks-ask-alert" in getattr(w, "_dom_classes", ())]
    assert len(alert_buttons) == 2
    alert_buttons[0].click()
    assert inbox_lines(camp)[-1]["moment"] in ("suspicious_gain", "limit_claim")
    # a failing handler becomes an error line, not an exception out of the button
    c._call(c.ask, "no-such-id")
    assert "no bank entry" in c.state["errors"][-1]


def test_refreshes_as_evaluations_land(camp, tmp_path):
    held = tmp_path / "held"
    held.mkdir()
    for n in ("1", "2"):
        shutil.move(camp / "evals" / n, held / n)
    c = Console(camp, ceilings=camp / "ceilings.json")
    assert c.state["evals"] == 1 and c.state["refreshes"] == 1
    assert c.poll() is False and c.state["refreshes"] == 1          # nothing new
    shutil.move(held / "1", camp / "evals" / "1")
    assert c.poll() is True and c.state["evals"] == 2 and len(c.state["timeline"]) == 2
    assert "suspicious_gain" in c.state["firing"]                    # 0.01x -> 0.78x is a jump
    shutil.move(held / "2", camp / "evals" / "2")
    asyncio.run(c.watch(every=0.01, rounds=2))                       # the watcher picks it up
    assert c.state["evals"] == 3 and c.state["refreshes"] == 3
    assert c.state["summary"]["at_parity"] == 19
    kinds = [a["kind"] for a in c.state["alerts"]]
    assert kinds.count("suspicious_gain") == 2                       # one per new firing, no repeats
    assert all(a["question"] for a in c.state["alerts"])


def test_campaign_picker_and_empty_campaign(tmp_path):
    root = tmp_path / "campaigns"
    (root / "empty").mkdir(parents=True)
    (root / "empty" / "config.json").write_text("{}")
    c = Console(root=root)
    assert c.state["campaign"] == str(root / "empty") and c.state["evals"] == 0
    assert "no evaluations" in c.state["errors"][-1]
    shutil.copytree(FIXTURE, root / "full")
    ui = c.widget and c._ui
    assert str(root / "full") in ui["campaign"].options
    ui["campaign"].value = str(root / "full")
    assert c.state["evals"] == 3 and c.state["alerts"]
