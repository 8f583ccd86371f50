"""The fa3api grid on the GPU, check only: every row matches reference_fa3, and no row runs on the
naive fallback (issue 25: "no scenario of the new grid runs on the naive fallback")."""
import functools

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import fa3api_grid as G  # noqa: E402

ROWS = {r["name"]: r for r in G.load_rows()}
NAIVE_ONLY: dict = {}   # feature -> why its rows may run the naive kernel (qv left it: kernels/qv_fwd.cu)


@functools.lru_cache(maxsize=None)
def checked(name: str) -> dict:
    return G.check(G.make_call(ROWS[name]))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_matches_the_reference(name):
    res = checked(name)
    assert res["ok"], res


def _fast_params():
    for name, r in sorted(ROWS.items()):
        why = NAIVE_ONLY.get(r.get("feature"))
        yield pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=why)) if why else name


@pytest.mark.parametrize("name", list(_fast_params()))
def test_row_runs_on_a_fast_path(name):
    res = checked(name)
    assert res["fast"], f"{name} took {res['paths']} (steps {res['steps']})"


# v25c (kernels/fa3_hopper/fa3_hopper.cu use_small_mixed): a small mixed call over a DENSE cache runs whole on
# the prefill; over pages it keeps the mixed path (the in-place page-16 prefill was 1.3-1.9x slower).
@pytest.mark.parametrize("name,paths", [("varlen_q_dense", ["prefill"]), ("varlen_q_paged", ["mixed_gather"])])
def test_small_mixed_calls_route_by_cache_layout(name, paths):
    assert checked(name)["paths"] == paths
