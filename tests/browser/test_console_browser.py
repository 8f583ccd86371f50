"""The console in a real browser: Voila serves notebooks/console.ipynb on 127.0.0.1 (a free port) over a
copy of the recorded campaign fixture; headless Chromium (Debian's /usr/bin/chromium) driven by
Playwright filters the bank, clicks Ask, types a question, and watches a new evaluation land.
Requests to any host but 127.0.0.1 are aborted. The screenshot goes to tests/browser/artifacts/
(git-ignored). Skips only when chromium is not installed; see tests/browser/README.md."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("KERNELSEEK_CHROMIUM", "/usr/bin/chromium"))
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)",
                allow_module_level=True)

import papermill as pm  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from kernelseek import bank, ledger  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "campaign_small"
ARTIFACTS = ROOT / "tests" / "browser" / "artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """(url, campaign dir): the console notebook with injected parameters, served by Voila."""
    camp = tmp_path / "campaigns" / "c1"
    shutil.copytree(FIXTURE, camp)
    nb = tmp_path / "console.ipynb"
    pm.execute_notebook(str(ROOT / "notebooks" / "console.ipynb"), str(nb), prepare_only=True, kernel_name="python3",
                        parameters={"campaign": str(camp), "root": str(camp.parent),
                                    "ceilings": str(camp / "ceilings.json"), "auto_refresh": 1.0})
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    log = open(tmp_path / "voila.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "voila", str(nb), f"--port={port}", "--no-browser",
                             "--Voila.ip=127.0.0.1", "--show_tracebacks=True"],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url + "voila/static/", timeout=2)
                break
            except OSError as e:
                if getattr(e, "code", None):        # an HTTP error: the server answers
                    break
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"voila did not start: {(tmp_path / 'voila.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield url, camp
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def inbox_lines(camp: Path, n: int, timeout: float = 20.0) -> list[dict]:
    """Wait until inbox.jsonl holds n lines; return them."""
    deadline = time.time() + timeout
    while True:
        lines = [json.loads(x) for x in (camp / "inbox.jsonl").read_text().splitlines()]
        if len(lines) >= n or time.time() > deadline:
            return lines
        time.sleep(0.2)


def test_console_in_chromium(served, tmp_path):
    url, camp = served
    plateau = [e for e in bank.load() if "plateau" in e.moments and e.usable(True, "hopper")]
    triage_qs = [e for e in plateau if e.group == "gap triage"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2400})
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                ("http://127.0.0.1", "ws://127.0.0.1")) else r.abort())
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

            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / ".gitignore").write_text("*\n")      # screenshots are not committed
            page.screenshot(path=str(ARTIFACTS / "console.png"), full_page=True)
            page.screenshot(path=str(tmp_path / "console.png"), full_page=True)
            assert (tmp_path / "console.png").stat().st_size > 50_000
        finally:
            browser.close()
