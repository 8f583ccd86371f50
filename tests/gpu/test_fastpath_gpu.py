"""The host fast path (kernelseek/attention_fastpath.py) on the GPU, every fa3api row: a call answered from
the cache gives the same o, lse and (appends) K/V caches, bit for bit, as the slow path on the same inputs;
a call whose entry was recorded is answered without building params (abi.make_params is not called); the
append rows (kv_update launch + one kernel, in one foreign call: kseek_kv_update_then) and the seqused_q row (segments launch + one kernel) are cached,
and, where the qv route's entries are on (the default; KSEEK_ATTENTION_FASTPATH_QV=0 turns them off:
fastpath_qv), so are the rows it takes."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import attention_core as core  # noqa: E402
from kernelseek import attention_fastpath as F  # noqa: E402
from kernelseek import fa3api_grid as G  # noqa: E402
from kernelseek import fastpath_qv as FQ  # noqa: E402

ROWS = {r["name"]: r for r in G.load_rows()}
MUST_CACHE = {"append", "append_rotary", "seqused_q"}   # features whose rows must get an entry


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_hit_equals_the_slow_path(name, monkeypatch, make_params_calls):
    row = ROWS[name]
    call = G.make_call(row, seed=5)
    kv = row["fn"] == "kvcache"
    fresh = (lambda: call.caches()) if kv else (lambda: None)
    F.clear()
    monkeypatch.setattr(F, "ENABLED", False)
    c0 = fresh()
    o0, l0 = call.bound(caches=c0)()
    built = make_params_calls
    monkeypatch.setattr(F, "ENABLED", True)
    monkeypatch.setattr(F, "RECORD_ON", 1)
    try:
        call.bound(caches=fresh())()                 # a miss: recorded
        entry = any(type(e) in (F.Entry, FQ.QvEntry) for e in F.CACHE.values())
        one_call = any(type(e) is F.Entry and e.own_ptrs is not None for e in F.CACHE.values())
        qv_route = core.RECORD["paths"] == ["qv"]
        n = built[0]
        c2 = fresh()
        o2, l2 = call.bound(caches=c2)()             # a hit when an entry was made
        torch.cuda.synchronize()
    finally:
        F.clear()
    if row.get("feature") in MUST_CACHE or (qv_route and F.QV_ENABLED):
        assert entry, f"{name}: no fast-path entry"
    if entry:
        assert built[0] == n, f"{name}: the entry was not used"
    if row.get("feature") in ("append", "append_rotary"):   # kernels/kv_update.cu's kseek_kv_update_then
        assert one_call, f"{name}: the append's hit is not one foreign call"
    assert torch.equal(o2, o0), f"{name}: o differs, max {(o2.float() - o0.float()).abs().max().item()}"
    assert torch.equal(l2, l0), f"{name}: lse differs"
    if kv:
        assert torch.equal(c2[0], c0[0]) and torch.equal(c2[1], c0[1]), f"{name}: caches differ"
