"""The console in a real browser: Voila serves notebooks/console.ipynb on 127.0.0.1 (a free port) over a
copy of the recorded campaign fixture; headless Chromium (Debian's /usr/bin/chromium) driven by
Playwright filters the bank, clicks Ask, types a question, and watches a new evaluation land.
Requests to any host but 127.0.0.1 are aborted. The screenshot goes to tests/browser/artifacts/
(git-ignored). Skips only when chromium is not installed; see tests/browser/README.md."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ks_browser import free_port, inbox_lines, screenshot, server_env, stop, wait_http
from playwright.sync_api import expect

from kernelseek import bank, ledger


@pytest.fixture
def served(console_nb, tmp_path):
    """(url, campaign dir): the prepared console notebook served by Voila on 127.0.0.1."""
    nb, camp = console_nb
    port = free_port()
    log = tmp_path / "voila.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "voila", str(nb), f"--port={port}", "--no-browser",
                                 "--Voila.ip=127.0.0.1", "--show_tracebacks=True"],
                                cwd=tmp_path, env=server_env(), stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_http(url + "voila/static/", proc, log, "voila")
            yield url, camp
        finally:
            stop(proc)


def test_console_in_chromium(served, chromium_page, tmp_path):
    url, camp = served
    plateau = [e for e in bank.load() if "plateau" in e.moments and e.usable(True, "hopper")]
    triage_qs = [e for e in plateau if e.group == "gap triage"]
    page = chromium_page(1400, 3600)
    page.goto(url, timeout=120_000)
    page.wait_for_selector(".ks-console", timeout=120_000)
    expect(page.locator(".ks-header")).to_contain_text("3 evaluation(s)")
    expect(page.locator(".ks-alerts")).to_contain_text("suspicious_gain")
    expect(page.locator(".ks-alerts")).to_contain_text("limit_claim")
    assert page.locator(".ks-plots img, .widget-image").count() == 3

    page.select_option(".ks-moment select", label="plateau")
    expect(page.locator(".ks-count")).to_contain_text(f"{len(plateau)} question(s)")
    page.select_option(".ks-group select", label="gap triage")
    expect(page.locator(".ks-count")).to_contain_text(f"{len(triage_qs)} question(s)")
    assert page.locator("button.ks-ask").count() == len(triage_qs)

    page.click("button.ks-ask-gt-01")
    lines = inbox_lines(camp, 1)
    assert [(x["source"], x.get("bank_id"), x.get("moment")) for x in lines] == [("console", "gt-01", "plateau")]
    expect(page.locator(".ks-status")).to_contain_text("asked (inbox line 0)")

    page.fill(".ks-free textarea", "Does the baseline win in cycles, or only in wall-clock time?")
    page.click("button.ks-ask-free")
    lines = inbox_lines(camp, 2)
    assert lines[1]["text"] == "Does the baseline win in cycles, or only in wall-clock time?"

    # an evaluation lands (written by the loop, recorded in its ledger): the console picks it up by
    # itself (auto_refresh 1 s); a results folder without a ledger entry would not count
    shutil.copytree(camp / "evals" / "1", camp / "evals" / "3")
    with open(camp / "trace.jsonl", "a") as f:
        f.write(json.dumps({"type": "evaluation", "n": 3, "dir": "evals/3",
                            "results_sha256": ledger.digest(camp / "evals" / "3" / "results.json")}) + "\n")
    expect(page.locator(".ks-header")).to_contain_text("4 evaluation(s)", timeout=30_000)

    assert screenshot(page, "console.png", tmp_path).stat().st_size > 50_000
