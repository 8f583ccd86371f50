"""The console under JupyterLab in a real browser: `jupyter lab` serves a folder holding a copy of the
recorded campaign and notebooks/console.ipynb (parameters injected for that copy) on 127.0.0.1 with a
token; headless Chromium (Debian's /usr/bin/chromium) driven by Playwright opens the notebook, runs all
cells from the Run menu, and checks that the console's widgets render in the notebook's output and that
an Ask click appends the question to the campaign's inbox.jsonl. Requests to any host but 127.0.0.1 are
aborted. The screenshot goes to tests/browser/artifacts/console_lab.png (git-ignored)."""
import os
import secrets
import subprocess
import sys

import pytest
from ks_browser import free_port, inbox_lines, screenshot, server_env, stop, wait_http
from playwright.sync_api import expect

pytest.importorskip("jupyterlab")


@pytest.fixture
def lab(console_nb, tmp_path):
    """(url with token, campaign dir): JupyterLab on 127.0.0.1, its settings and runtime files in tmp_path."""
    nb, camp = console_nb
    port, token = free_port(), secrets.token_hex(16)
    env = server_env()
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")):
        env[var] = str(tmp_path / "jupyter" / sub)
    log = tmp_path / "lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                                 f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
                                 f"--ServerApp.root_dir={tmp_path}",
                                 "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                                 "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
                                 "--ServerApp.terminals_enabled=False"]
                                + (["--allow-root"] if os.geteuid() == 0 else []),
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_http(f"{base}/api/status?token={token}", proc, log, "jupyter lab")
            yield f"{base}/lab/tree/notebooks/console.ipynb?token={token}", camp
        finally:
            stop(proc)


def test_console_in_jupyterlab(lab, chromium_page, tmp_path):
    url, camp = lab
    page = chromium_page(1400, 1800)
    page.goto(url, timeout=120_000)
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    # the kernel must be connected and idle before "Run All Cells"
    expect(page.locator(".jp-StatusBar-Widget", has_text="Python 3 (ipykernel) | Idle")).to_have_count(1, timeout=120_000)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

    console = page.locator(".jp-OutputArea .ks-console")
    expect(console).to_have_count(1, timeout=120_000)
    expect(console.locator(".ks-header")).to_contain_text("3 evaluation(s)", timeout=60_000)
    expect(console.locator(".ks-alerts")).to_contain_text("suspicious_gain")
    expect(console.locator(".ks-plots img, .widget-image")).to_have_count(3)
    assert console.locator("button.ks-ask").count() > 0

    console.locator("button.ks-ask").first.scroll_into_view_if_needed()
    first = console.locator("button.ks-ask").first
    bank_id = next(c.removeprefix("ks-ask-") for c in first.get_attribute("class").split()
                   if c.startswith("ks-ask-") and c != "ks-ask-free")
    first.click()
    lines = inbox_lines(camp, 1)
    assert [(x["source"], x.get("bank_id")) for x in lines] == [("console", bank_id)]
    expect(console.locator(".ks-status")).to_contain_text("asked (inbox line 0)")

    news = page.get_by_role("button", name="No", exact=True)     # JupyterLab's "notify about news?" toast
    if news.count():
        news.first.click()
        expect(news).to_have_count(0)
    assert screenshot(page, "console_lab.png", tmp_path).stat().st_size > 50_000
