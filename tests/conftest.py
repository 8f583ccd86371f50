"""Fixtures shared by tests/unit and tests/gpu."""
import pytest


@pytest.fixture
def make_params_calls(monkeypatch):
    """A one-element list counting abi.make_params calls within the test: the slow path building kseek_params,
    which a fast-path hit never does."""
    from kernelseek import abi
    n, make = [0], abi.make_params

    def counted(*a, **kw):
        n[0] += 1
        return make(*a, **kw)
    monkeypatch.setattr(abi, "make_params", counted)
    return n
