"""Fixtures shared by the unit tests."""
import sys
from pathlib import Path

import pytest

STANDIN = [sys.executable, str(Path(__file__).resolve().parents[1] / "fixtures" / "worker" / "standin_worker.py")]


@pytest.fixture
def worker(tmp_path):
    """A real worker process running the stand-in worker (the worker's protocol, no GPU)."""
    from kernelseek.worker import Worker
    w = Worker(cmd=STANDIN, log_path=tmp_path / "worker.log")
    yield w
    w.close()
