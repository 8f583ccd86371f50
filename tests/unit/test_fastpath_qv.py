"""kernelseek.fastpath_qv on CPU tensors through the qv route's host code (qv_attention.run against the
host-only stand-in for kernels/qv_fwd, host_standins.qv_host_lib): a hit hands kseek_qv_fwd the params, the
qv pointer and the strides the slow path gives it, field for field (o/lse/workspace are the call's own fresh
tensors), builds no params; new tensors of the same layout hit with their own pointers; the entries are off
until QV_ENABLED; a refusal or a replaced library on a hit reruns the slow path.
"""
import pytest
import torch

from kernelseek import attention as A
from kernelseek import attention_core as C
from kernelseek import attention_fastpath as F
from kernelseek import fastpath_qv as FQ
from kernelseek import host_standins as HS

OWN = ("o", "lse", "workspace")


@pytest.fixture(scope="module")
def qv_lib(tmp_path_factory):
    return HS.qv_host_lib(tmp_path_factory.mktemp("qv_hostonly"))


def _spy_fns(fns, seen, status=None):
    """qv_host_lib()'s functions with kseek_qv_fwd wrapped: each call appends (params dict, qv, strides);
    status: a one-element list whose value, when not None, it returns instead of calling."""
    fwd = fns[0]

    def qv_fwd(pp, qv, bs, rs, hs, stream):
        seen.append((pp._obj.to_dict(), qv, (bs, rs, hs)))
        return fwd(pp, qv, bs, rs, hs, stream) if status is None or status[0] is None else status[0]
    return (qv_fwd,) + tuple(fns[1:])


@pytest.fixture
def spy(qv_lib, monkeypatch, make_params_calls):
    seen, built, status = [], make_params_calls, [None]
    monkeypatch.setattr(F, "ENABLED", True)
    monkeypatch.setattr(F, "QV_ENABLED", True)
    monkeypatch.setattr(F, "RECORD_ON", 1)
    F.clear()
    with HS.qv_on_cpu(_spy_fns(qv_lib, seen, status)):
        yield seen, built, status
    F.clear()


def _t(*shape, g):
    return torch.randn(*shape, generator=g).to(torch.bfloat16)


def calls(seed=0):
    """name -> a no-argument qv-route call (its tensors made once, seeded)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v, qv = _t(2, 70, 16, 64, g=g), _t(2, 90, 1, 64, g=g), _t(2, 90, 1, 512, g=g), _t(2, 70, 16, 512, g=g)
    qp, qvp = _t(75, 8, 64, g=g), _t(75, 8, 256, g=g)
    kp, vp = _t(140, 2, 64, g=g), _t(140, 2, 256, g=g)
    cu_q, cu_k = torch.tensor([0, 70, 75], dtype=torch.int32), torch.tensor([0, 100, 140], dtype=torch.int32)
    kc, vc = _t(12, 16, 1, 64, g=g), _t(12, 16, 1, 512, g=g)
    table = torch.randperm(12, generator=g).view(2, 6).int()
    lens = torch.tensor([90, 17], dtype=torch.int32)
    q1, qv1 = _t(2, 3, 16, 64, g=g), _t(2, 3, 16, 512, g=g)
    return {
        "dense_qv": lambda: A.flash_attn_func(q, k, v, qv=qv, causal=True, return_attn_probs=True),
        "dense_plain_dv512": lambda: A.flash_attn_func(q, k, v, return_attn_probs=True),
        "varlen_qv": lambda: A.flash_attn_varlen_func(qp, kp, vp, cu_q, cu_k, 70, 100, qv=qvp, causal=True,
                                                      return_attn_probs=True),
        "paged_qv": lambda: A.flash_attn_with_kvcache(q1, kc, vc, qv=qv1, cache_seqlens=lens, page_table=table,
                                                      causal=True, return_softmax_lse=True),
    }


def _one(spy, fn):
    """fn(): (result, (params, qv, strides) of its one kseek_qv_fwd, did the slow path build params?)."""
    seen, built = spy[:2]
    n, b = len(seen), built[0]
    res = fn()
    assert len(seen) == n + 1, "one kseek_qv_fwd per call"
    assert C.RECORD["paths"] == ["qv"]
    p = seen[-1][0]
    o, lse = res
    assert (p["o"], p["lse"]) == (o.data_ptr(), lse.data_ptr())
    assert bool(p["workspace"]) == (p["workspace_bytes"] > 0)    # a workspace only where the keys are split
    return res, seen[-1], built[0] > b


def _same(a, b):
    """The kernel's arguments equal but for the call's own allocations."""
    strip = lambda x: ({k: v for k, v in x[0].items() if k not in OWN}, x[1], x[2])  # noqa: E731
    return strip(a) == strip(b)


@pytest.mark.parametrize("name", sorted(calls()))
def test_a_qv_hit_gives_the_kernel_the_slow_paths_arguments(spy, name):
    fn = calls()[name]
    counts = C.PATH_COUNTS["qv"]
    _, first, ran = _one(spy, fn)        # the miss that records the entry
    assert ran
    assert type(F.CACHE[next(iter(F.CACHE))]) is FQ.QvEntry, F.CACHE
    res, hit, ran = _one(spy, fn)
    assert not ran, "the repeated call took the slow path"
    assert _same(first, hit) and C.PATH_COUNTS["qv"] == counts + 2
    assert res[0].shape[-1] == fn()[0].shape[-1]


def test_new_tensors_of_the_same_layout_hit_with_their_own_pointers(spy):
    first = calls(1)                      # kept alive: the new tensors get other addresses
    _one(spy, first["varlen_qv"])
    other = calls(2)["varlen_qv"]
    (o, _), hit, ran = _one(spy, other)
    assert not ran
    seen = spy[0]
    F.ENABLED = False
    try:
        _one(spy, other)
    finally:
        F.ENABLED = True
    assert _same(seen[-1], hit)          # the slow path on the same new tensors gives the same arguments
    assert hit[1] is not None and hit[0]["q"] != spy[0][0][0]["q"]


def test_qv_entries_stay_off_unless_enabled(spy, monkeypatch):
    monkeypatch.setattr(F, "QV_ENABLED", False)
    fn = calls()["dense_qv"]
    for _ in range(3):
        assert _one(spy, fn)[2], "each call builds its params on the slow path"
    assert list(F.CACHE.values()) == [F.SLOW]


def test_a_refused_hit_reruns_the_slow_path_and_raises(spy):
    fn = calls()["paged_qv"]
    _one(spy, fn)
    spy[2][0] = 2                        # KSEEK_ERR_INVALID from the stand-in on every call now
    with pytest.raises(RuntimeError, match="kseek_qv_fwd"):
        fn()
    assert not F.CACHE or type(next(iter(F.CACHE.values()))) is not FQ.QvEntry


def test_a_replaced_library_misses_and_records_again(spy, qv_lib):
    from kernelseek import qv_attention
    fn = calls()["dense_plain_dv512"]
    _one(spy, fn)
    old = next(iter(F.CACHE.values()))
    qv_attention._LIB[:] = [_spy_fns(qv_lib, spy[0])]
    _, _, ran = _one(spy, fn)
    assert ran and not F.CACHE            # the stale entry dropped, the call answered by the slow path
    _one(spy, fn)                         # recorded again, on the new library
    new = next(iter(F.CACHE.values()))
    assert type(new) is FQ.QvEntry and new is not old and new.fn is qv_attention._LIB[0][0]
    assert not _one(spy, fn)[2]


@pytest.mark.parametrize("name,split", [("dense_qv", False), ("paged_qv", True)])
def test_a_hit_makes_only_its_own_allocations(spy, monkeypatch, name, split):
    fn = calls()[name]
    _one(spy, fn)
    made = []
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: made.append(a) or empty(*a, **kw))
    _, (p, _, _), _ = _one(spy, fn)
    assert (p["workspace_bytes"] > 0) == split            # the decode-shaped call splits its keys
    assert len(made) == 2 + split, made                    # o, lse (and the split call's workspace)
