"""Helpers of the browser tests (imported by conftest.py and the tests): free ports on 127.0.0.1, waiting
for a server, stopping it, the server's environment, reading the campaign's inbox, screenshots."""
import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "campaign_small"
ARTIFACTS = ROOT / "tests" / "browser" / "artifacts"
CHROMIUM = Path(os.environ.get("KERNELSEEK_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, log: Path, what: str, timeout: float = 90.0) -> None:
    """Wait until `url` answers (any HTTP status counts); raise with the server's log if it dies or hangs."""
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError as e:
            if getattr(e, "code", None):        # an HTTP error: the server answers
                return
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{what} did not start: {log.read_text()[-3000:]}")
            time.sleep(0.3)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def inbox_lines(camp: Path, n: int, timeout: float = 20.0) -> list[dict]:
    """Wait until inbox.jsonl holds n lines; return them."""
    deadline = time.time() + timeout
    while True:
        lines = [json.loads(x) for x in (camp / "inbox.jsonl").read_text().splitlines()]
        if len(lines) >= n or time.time() > deadline:
            return lines
        time.sleep(0.2)


def server_env() -> dict:
    """The environment for a server whose kernels import this checkout's kernelseek."""
    extra = [p for p in [os.environ.get("PYTHONPATH")] if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + extra))



def screenshot(page, name: str, tmp_path: Path) -> Path:
    """A full-page screenshot into tests/browser/artifacts/ (git-ignored) and tmp_path; returns the latter."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")      # screenshots are not committed
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    page.screenshot(path=str(tmp_path / name), full_page=True)
    return tmp_path / name
