"""A screenshot of the questioner's console (notebooks/console.ipynb) on one campaign folder: Voila serves
the notebook on 127.0.0.1 (a free port), headless Chromium (Debian's, driven by Playwright; requests to any
other host are aborted) waits for the console's header and plots, and saves a full-page PNG.
    python3 tools/console_shot.py CAMPAIGN_DIR OUT.png
Work on a copy of the campaign: the console may write its inbox. Needs what tests/browser needs."""
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from ks_browser import ARGS, CHROMIUM, free_port, server_env, stop, wait_http  # noqa: E402


def shoot(camp: Path, out: Path, width: int = 1400, height: int = 2400) -> None:
    """Serve the console over `camp` and write its full-page screenshot to `out` (PNG)."""
    import papermill as pm
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as tmp:
        nb = Path(tmp) / "console.ipynb"
        pm.execute_notebook(str(ROOT / "notebooks" / "console.ipynb"), str(nb), prepare_only=True,
                            kernel_name="python3", parameters={"campaign": str(camp), "root": str(camp.parent),
                                                               "auto_refresh": 0.0})
        port, log = free_port(), Path(tmp) / "voila.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen([sys.executable, "-m", "voila", str(nb), f"--port={port}", "--no-browser",
                                     "--Voila.ip=127.0.0.1", "--show_tracebacks=True"],
                                    cwd=tmp, env=server_env(), stdout=f, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_http(url + "voila/static/", proc, log, "voila")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
                page = browser.new_page(viewport={"width": width, "height": height})
                page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                    ("http://127.0.0.1", "ws://127.0.0.1")) else r.abort())
                page.goto(url, timeout=180_000)
                page.wait_for_selector(".ks-console", timeout=180_000)
                page.wait_for_selector(".ks-plots img, .widget-image", timeout=60_000)
                page.wait_for_timeout(1500)                      # let the last images paint
                page.screenshot(path=str(out), full_page=True)
                browser.close()
        finally:
            stop(proc)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not (Path(sys.argv[1]) / "trace.jsonl").is_file():
        sys.exit("usage: python3 tools/console_shot.py CAMPAIGN_DIR OUT.png (CAMPAIGN_DIR holds trace.jsonl)")
    shoot(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
    print(sys.argv[2])
