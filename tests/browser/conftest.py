"""Fixtures of the browser tests: Debian's Chromium driven by Playwright (skipped only when it is not
installed), and a copy of the recorded campaign with the console notebook prepared for it."""
import shutil

import pytest
from ks_browser import ARGS, CHROMIUM, FIXTURE, ROOT


@pytest.fixture
def console_nb(tmp_path):
    """(notebook, campaign dir): tmp/notebooks/console.ipynb with its parameters injected by papermill
    (prepare_only) for a copy of the recorded campaign at tmp/campaigns/c1."""
    import papermill as pm
    camp = tmp_path / "campaigns" / "c1"
    shutil.copytree(FIXTURE, camp)
    nb = tmp_path / "notebooks" / "console.ipynb"
    nb.parent.mkdir()
    pm.execute_notebook(str(ROOT / "notebooks" / "console.ipynb"), str(nb), prepare_only=True, kernel_name="python3",
                        parameters={"campaign": str(camp), "root": str(camp.parent),
                                    "ceilings": str(camp / "ceilings.json"), "auto_refresh": 1.0})
    return nb, camp


@pytest.fixture
def chromium_page():
    """A factory of Playwright pages in headless Chromium that reach 127.0.0.1 only (every other request
    is aborted). Skips, saying why, when Debian's chromium is not installed."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)

        def new_page(width=1400, height=2400):
            page = browser.new_page(viewport={"width": width, "height": height})
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                ("http://127.0.0.1", "ws://127.0.0.1")) else r.abort())
            return page
        try:
            yield new_page
        finally:
            browser.close()
