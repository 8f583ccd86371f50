"""The fa3api grid on the GPU, check only: every row matches reference_fa3 and no row runs on the
naive fallback (issue 25: "no scenario of the new grid runs on the naive fallback")."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import fa3api_grid as G  # noqa: E402


NAIVE_ONLY = {"qv": "qv's head dim (D + Dv = 576) only fits naive_wide_kernel: no fast path yet (issue 25)"}


def _rows():
    for r in G.load_rows():
        why = NAIVE_ONLY.get(r.get("feature"))
        yield pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=why)) if why else r


@pytest.mark.parametrize("row", list(_rows()), ids=lambda r: r["name"])
def test_row_correct_and_on_a_fast_path(row):
    res = G.check(G.make_call(row))
    assert res["ok"], res
    assert res["fast"], f"{row['name']} took {res['paths']} (steps {res['steps']})"
