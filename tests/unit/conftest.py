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


@pytest.fixture
def load_tool():
    """load_tool("name"): tools/name.py as a module (the tools are scripts, not a package)."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "tools" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load
