"""The serving host path takes no host sync (issue 26, item 3, as far as a CPU can tell): every serving row's
scaled copy runs kernelseek.attention.flash_attn_with_kvcache under host_syncs.SyncRecorder, with only the
CPU-only float64 answer (attention_core._run_reference, which reads lengths back by design) paused; then
again through the CUDA path's host code itself (host_standins.kernel_prep_on_cpu: _run_kernel, Inputs,
make_params, the ctypes call, against a host-only kseek.h library built by nvcc), with nothing paused. The
recorder itself is shown to catch each kind of sync, and to see inside the call (unpaused, the reference's
reads are found). What a CPU cannot see: CUDA's own host work (stream lookup, the real kseek_fwd);
tests/gpu/test_serving_gpu.py checks that with torch.cuda.set_sync_debug_mode("error") and graph capture."""
import pytest
import torch

from kernelseek import attention_core as core
from kernelseek import host_standins as HS
from kernelseek import serving_grid as G
from kernelseek.host_syncs import SyncRecorder

ROWS = G.load_rows()

CONTROLS = {
    "tolist": lambda t: t.tolist(),
    "int": lambda t: int(t[0]),
    "item": lambda t: t.max().item(),
    "bool": lambda t: bool((t > 2).any()),
    "bool-mask index": lambda t: t[t > 2],
    "bool-mask write": lambda t: t.clone().__setitem__(t > 2, 0),
    "nonzero": lambda t: torch.nonzero(t),
    "repeat_interleave by tensor": lambda t: torch.repeat_interleave(t, t),
    "torch.tensor from host data": lambda t: torch.tensor([1, 2]),
    "cpu": lambda t: t.cpu(),
}
CLEAN = {
    "arithmetic": lambda t: (t * 2 + 1).cumsum(0),
    "long-index gather": lambda t: t[torch.arange(3)],
    "long-index write": lambda t: t.clone().index_put_((torch.arange(2),), torch.zeros(2, dtype=t.dtype)),
    "repeat_interleave by int": lambda t: t.repeat_interleave(3),
    "searchsorted": lambda t: torch.searchsorted(t, t),
}


@pytest.mark.parametrize("name", CONTROLS)
def test_recorder_catches(name):
    t = torch.arange(6)
    with SyncRecorder() as rec:
        CONTROLS[name](t)
    assert rec.found, f"{name} was not recorded"
    assert "test_serving_sync.py" in rec.report()


@pytest.mark.parametrize("name", CLEAN)
def test_recorder_passes_device_side_ops(name):
    t = torch.arange(6)
    with SyncRecorder() as rec:
        CLEAN[name](t)
    assert not rec.found, rec.report()


def _run(call, pause_reference: bool):
    orig = core._run_reference
    with SyncRecorder() as rec:
        def answer(c):
            if not pause_reference:
                return orig(c)
            with rec.paused():
                return orig(c)
        core._run_reference = answer
        try:
            G.ours(call)
        finally:
            core._run_reference = orig
    return rec


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_serving_call_has_no_host_sync(row):
    call = G.make_call(G.scaled(row), device="cpu", seed=7)
    rec = _run(call, pause_reference=True)
    assert core.RECORD["paths"] == ["reference"]
    assert not rec.found, f"{row.name}: host syncs in the plan:\n{rec.report()}"


def test_recorder_sees_inside_the_call():
    call = G.make_call(G.scaled(ROWS[0]), device="cpu")
    rec = _run(call, pause_reference=False)
    assert any("attention_core.py" in where or "reference_fa3.py" in where for _, where in rec.found), rec.report()


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    return HS.host_lib(tmp_path_factory.mktemp("hostonly"))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_serving_call_down_to_the_launch_has_no_host_sync(host_lib, row):
    call = G.make_call(G.scaled(row), device="cpu", seed=8)
    with HS.kernel_prep_on_cpu(host_lib), SyncRecorder() as rec:
        G.ours(call)
        assert core.RECORD["paths"] == ["prefill"]           # the launch path ran (the stand-in reports 2)
    assert not rec.found, f"{row.name}: host syncs between the call and the launch:\n{rec.report()}"
