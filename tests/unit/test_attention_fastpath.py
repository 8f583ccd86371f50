"""kernelseek.attention_fastpath on CPU tensors through the CUDA path's host code (the host-only kseek.h
library of host_standins, and its host-only kv_update.cu, which updates the cache on the host): a hit
hands kseek_fwd (and kseek_kv_update, for an append) the params the slow path builds for that call, field
for field, pointers included (o/lse/workspace, q_out/seqused_out are the call's own fresh tensors); a
change in any part of the key misses; the calls it cannot prove identical keep the slow path.

`_run` captures each kseek_fwd's params and whether the slow path built them (abi.make_params ran);
`spy[2]` gets each kseek_kv_update's params (and what it wrote to q_out and seqused_out), `spy[3]` each
kseek_seqused_segments call's arguments (and what it wrote to out): the host-only build of the real
kernels/seqused_segments.cu (host_standins.segments_host_lib) computes them on the host.
"""
import contextlib
import ctypes
import os

import pytest
import torch

from kernelseek import abi, attention_cache, kv_update
from kernelseek import attention as A
from kernelseek import attention_core as C
from kernelseek import attention_fastpath as F
from kernelseek import attention_hostcost as H
from kernelseek import host_standins as HS
from kernelseek.kv_update import KvuParams

HQ, HKV, D = 8, 2, 128
OWN = ("o", "lse", "workspace")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return HS.host_lib(tmp_path_factory.mktemp("hostonly"))


@pytest.fixture(scope="module")
def kvu_lib(tmp_path_factory):
    return HS.kvu_host_lib(tmp_path_factory.mktemp("kvu_hostonly"))


def _kvu_record(p, stream, seen):
    """Append (params dict, stream, q_out bytes, seqused_out bytes) of a kseek_kv_update call to seen."""
    q_bytes = p.total_q * p.heads_q * p.head_dim * (1 if p.dtype == 2 else 2)
    seen.append(({n: getattr(p, n) for n, _ in KvuParams._fields_}, stream.value,
                 ctypes.string_at(p.q_out, q_bytes) if p.q_out else None, ctypes.string_at(p.seqused_out, 4 * p.batch)))


def _kvu_spy(fn, seen):
    """fn (a kseek_kv_update) that also records each call in seen (_kvu_record)."""
    def kvu(pp, stream):
        rc = fn(pp, stream)
        _kvu_record(pp._obj, stream, seen)
        return rc
    return kvu


_FWD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _then_spy(then, lib, seen, calls):
    """The host-only build's kseek_kv_update_then (`then`) as kv_update.THEN gives it to a hit, for the tests:
    it checks that the hit passes lib's kseek_fwd by address, then runs the real C pairing with a ctypes
    callback as the kseek_fwd it calls, which calls abi.KernelLib.fwd (the spy fixture's, so `_run` sees it,
    or a test's refusing stand-in); records the update as _kvu_spy does and each call in `calls`."""
    want = ctypes.cast(lib._fwd, ctypes.c_void_p).value

    @_FWD_CB
    def fwd(p, stream):
        return abi.KernelLib.fwd(lib, abi.KseekParams.from_address(p), stream)

    def spy_then(u, fwd_addr, p, stream):
        assert fwd_addr.value == want, "the hit passed another kseek_fwd"
        rc = then(u, ctypes.cast(fwd, ctypes.c_void_p), p, stream)
        _kvu_record(u._obj, stream, seen)
        calls.append(rc)
        return rc
    spy_then.keep = fwd         # the callback lives as long as the spy
    return spy_then


@pytest.fixture(scope="module")
def seg_lib(tmp_path_factory):
    return HS.segments_host_lib(tmp_path_factory.mktemp("seg_hostonly"))


def _seg_spy(fn, seen):
    """fn (a kseek_seqused_segments) that also appends (arguments dict, stream, out bytes) to seen."""
    def seg(*args):
        rc = fn(*args)
        a = dict(zip(("cu_q", "seqused_q", "cu_k", "used_k", "batch", "out"), args))
        seen.append((a, getattr(args[6], "value", args[6]), ctypes.string_at(a["out"], 4 * (6 * a["batch"] + 2))))
        return rc
    return seg


@pytest.fixture
def spy(lib, kvu_lib, seg_lib, monkeypatch):
    """Within kernel_prep_on_cpu, kv_update_on_cpu and segments_on_cpu: a list that gets (library, params dict,
    stream) per kseek_fwd, a counter of slow-path params builds, the kv_update calls (_kvu_spy) and the
    seqused_segments calls (_seg_spy)."""
    seen, built, kvu_seen, seg_seen = [], [0], [], []
    fwd, make = abi.KernelLib.fwd, abi.make_params

    def fwd_spy(self, params, stream=0):
        seen.append((self, params.to_dict(), stream))
        return fwd(self, params, stream)

    def make_spy(*a, **kw):
        built[0] += 1
        return make(*a, **kw)
    monkeypatch.setattr(abi.KernelLib, "fwd", fwd_spy)
    monkeypatch.setattr(abi, "make_params", make_spy)
    monkeypatch.setattr(F, "ENABLED", True)
    monkeypatch.setattr(F, "RECORD_ON", 1)      # record on the first sighting (test_a_key_is_recorded_...: 2)
    F.clear()
    with HS.kernel_prep_on_cpu(lib), HS.kv_update_on_cpu(_kvu_spy(kvu_lib, kvu_seen)), \
            HS.segments_on_cpu(_seg_spy(seg_lib, seg_seen)):
        yield seen, built, kvu_seen, seg_seen
    F.clear()


@pytest.fixture(params=["two calls", "one call"])
def aspy(request, spy, lib, kvu_lib, monkeypatch):
    """spy for appends, in both forms of a hit: "two calls" (kseek_kv_update, then kseek_fwd: a kv_update
    library without kseek_kv_update_then) and "one call" (kseek_kv_update_then, through _then_spy); spy's
    tuple plus the list of then calls and the form."""
    calls = []
    if request.param == "one call":
        then = kv_update.then_of(kvu_lib)
        assert then is not None, "the host-only kv_update library has no kseek_kv_update_then"
        monkeypatch.setattr(kv_update, "THEN", [(kv_update._LIB[0], _then_spy(then, lib, spy[2], calls))])
    else:
        monkeypatch.setattr(kv_update, "THEN", [])
    return (*spy, calls, request.param)


def _run(spy, fn, fast=True):
    """fn() with the fast path on or off: (result, params dict of its one kseek_fwd, slow path ran?)."""
    seen, built = spy[:2]
    n_seen, n_built = len(seen), built[0]
    F.ENABLED = fast
    try:
        res = fn()
    finally:
        F.ENABLED = True
    assert len(seen) == n_seen + 1, "one kseek_fwd per call"
    params = dict(seen[-1][1])
    o, lse = res if isinstance(res, tuple) else (res, None)
    if lse is not None:
        assert params["lse"] == lse.data_ptr()
    assert params["workspace"] and params["workspace_bytes"] >= abi.MIN_WORKSPACE_BYTES
    return res, params, built[0] > n_built


def _same(a, b):
    """Params equal but for the call's own allocations (o, lse, workspace addresses)."""
    return {k: v for k, v in a.items() if k not in OWN} == {k: v for k, v in b.items() if k not in OWN}


def _check_hit(spy, fn):
    """Slow path alone, then a miss, then a hit: all three give kseek_fwd the same params, RECORD and
    path counts; the hit builds no params. -> the hit's result."""
    counts = C.PATH_COUNTS.copy()
    slow, p_slow, ran = _run(spy, fn, fast=False)
    rec = (list(C.RECORD["steps"]), list(C.RECORD["paths"]))
    assert ran
    _, p_miss, ran = _run(spy, fn)
    assert ran and _same(p_slow, p_miss)
    res, p_hit, ran = _run(spy, fn)
    assert not ran, "the repeated call took the slow path"
    assert _same(p_slow, p_hit) and (list(C.RECORD["steps"]), list(C.RECORD["paths"])) == rec
    assert sum((C.PATH_COUNTS - counts).values()) == 3 and C.PATH_COUNTS[rec[1][0]] - counts[rec[1][0]] == 3
    for a, b in zip(slow if isinstance(slow, tuple) else (slow,), res if isinstance(res, tuple) else (res,)):
        assert (a.shape, a.dtype, a.stride(), a.device) == (b.shape, b.dtype, b.stride(), b.device)
    return res, p_hit


def _t(*shape, dtype=torch.bfloat16, g=None):
    return torch.randn(*shape, generator=g).to(dtype)


def _i32(x):
    return torch.tensor(x, dtype=torch.int32)


def _paged(b=4, pages=6, ps=16, dtype=torch.bfloat16):
    n = b * pages
    return _t(n, ps, HKV, D, dtype=dtype), _t(n, ps, HKV, D, dtype=dtype), torch.randperm(n).view(b, pages).int()


def calls():
    """name -> a no-argument call (its tensors made once)."""
    q, k, v = _t(2, 33, HQ, D), _t(2, 40, HKV, D), _t(2, 40, HKV, D)
    qp, kp, vp = _t(31, HQ, D), _t(47, HKV, D), _t(47, HKV, D)
    cu_q, cu_k = _i32([0, 5, 30, 31]), _i32([0, 9, 40, 47])
    kc, vc, table = _paged()
    q1, lens = _t(4, 1, HQ, D), _i32([96, 1, 50, 17])
    kd, vd, idx = _t(3, 64, HKV, D), _t(3, 64, HKV, D), _i32([2, 0])
    f8 = torch.float8_e4m3fn
    q8, k8, v8 = _t(2, 1, HQ, D, dtype=f8), *_paged(2, 4, 16, f8)[:2]
    t8, ds, lens8 = torch.randperm(8).view(2, 4).int(), [torch.rand(2, HKV) + 0.5 for _ in range(3)], _i32([60, 3])
    out, sinks = torch.empty(2, 33, HQ, D, dtype=torch.bfloat16), torch.randn(HQ)
    return {
        "dense": lambda: A.flash_attn_func(q, k, v, causal=True, return_attn_probs=True),
        "dense_out_sinks_softcap": lambda: A.flash_attn_func(q, k, v, softcap=30.0, window_size=[16, 0], s_aux=sinks,
                                                             out=out, return_attn_probs=True),
        "varlen": lambda: A.flash_attn_varlen_func(qp, kp, vp, cu_q, cu_k, 25, 31, causal=True),
        "paged_decode": lambda: A.flash_attn_with_kvcache(q1, kc, vc, cache_seqlens=lens, page_table=table,
                                                          num_splits=3, return_softmax_lse=True),
        "varlen_q_paged": lambda: A.flash_attn_with_kvcache(qp[:6], kc, vc, cache_seqlens=lens, page_table=table,
                                                            cu_seqlens_q=_CU6, max_seqlen_q=3, causal=True),
        "batch_idx": lambda: A.flash_attn_with_kvcache(q1[:2], kd, vd, cache_seqlens=lens[:2],
                                                       cache_batch_idx=idx, causal=True),
        "fp8_paged": lambda: A.flash_attn_with_kvcache(q8, k8, v8, cache_seqlens=lens8, page_table=t8,
                                                       q_descale=ds[0], k_descale=ds[1], v_descale=ds[2]),
    }


_CU6 = _i32([0, 1, 2, 5, 6])


@pytest.mark.parametrize("name", sorted(calls()))
def test_a_hit_gives_the_kernel_the_slow_paths_params(spy, name):
    res, p = _check_hit(spy, calls()[name])
    o = res[0] if isinstance(res, tuple) else res
    if name == "dense_out_sinks_softcap":
        assert p["o"] != o.data_ptr()              # out= gets a copy of the kernel's o, as on the slow path
    if name == "batch_idx":
        assert C.RECORD["steps"] == ["batch-idx-as-pages"]


def test_new_tensors_of_the_same_layout_hit_with_their_own_pointers(spy):
    big = _t(2, 34, HQ, D)
    for i in range(3):
        q = big[:, i % 2:i % 2 + 33]              # a view at another offset, the same strides
        k, v = _t(2, 40, HKV, D), _t(2, 40, HKV, D)
        _, p, ran = _run(spy, lambda: A.flash_attn_func(q, k, v, causal=True))
        assert ran == (i == 0)
        assert (p["q"], p["k"], p["v"]) == (q.data_ptr(), k.data_ptr(), v.data_ptr())


def test_every_part_of_the_key_misses(spy):
    """Each variant of a cached call misses once, then hits, and gets the slow path's params."""
    g = torch.Generator().manual_seed(0)
    q, k, v = _t(2, 33, HQ, D, g=g), _t(2, 40, HKV, D, g=g), _t(2, 40, HKV, D, g=g)
    kt = _t(2, HKV, 40, D, g=g).transpose(1, 2)                  # same shape as k, other strides
    c = dict(causal=True)
    variants = {"base": (q, k, v, c), "strides": (q, kt, v, c), "noncontig_q": (_t(2, 66, HQ, D)[:, ::2], k, v, c),
                "fp16": (q.half(), k.half(), v.half(), c), "causal": (q, k, v, dict(causal=False)),
                "window": (q, k, v, dict(c, window_size=(8, -1))), "softcap": (q, k, v, dict(c, softcap=5.0)),
                "scale": (q, k, v, dict(c, softmax_scale=0.5)), "splits": (q, k, v, dict(c, num_splits=4)),
                "chunk": (q, k, v, dict(c, attention_chunk=16)), "sinks": (q, k, v, dict(c, s_aux=torch.randn(HQ))),
                "scale_int": (q, k, v, dict(c, softmax_scale=1)), "scale_float": (q, k, v, dict(c, softmax_scale=1.0)),
                "lse": (q, k, v, dict(c, return_attn_probs=True)), "positional": (q, k, v, None)}
    keys = set()
    for name, (qq, kk, vv, kw) in variants.items():
        fn = (lambda: A.flash_attn_func(qq, kk, vv, None, True)) if kw is None else \
            (lambda: A.flash_attn_func(qq, kk, vv, **kw))
        _, p_slow, _ = _run(spy, fn, fast=False)
        _, p_miss, ran_miss = _run(spy, fn)
        _, p_hit, ran_hit = _run(spy, fn)
        assert ran_miss and not ran_hit, name
        assert _same(p_slow, p_miss) and _same(p_slow, p_hit), name
        keys.add(tuple(sorted((k_, v_) for k_, v_ in p_hit.items() if k_ not in OWN)))
    assert len(F.CACHE) == len(variants)
    assert len(keys) >= len(variants) - 4   # lse, positional and scale 1 / 1.0 give the kernel the same params


def test_none_then_a_tensor_misses(spy):
    q1, (kc, vc, table) = _t(4, 1, HQ, D), _paged()
    lens = _i32([96, 1, 50, 17])
    fn = lambda lp: A.flash_attn_with_kvcache(q1, kc, vc, cache_seqlens=lens, page_table=table, cache_leftpad=lp)
    _run(spy, lambda: fn(None))
    _, p, ran = _run(spy, lambda: fn(None))
    assert not ran and p["leftpad_k"] is None
    lp = _i32([0, 0, 3, 1])
    _, p, ran = _run(spy, lambda: fn(lp))
    assert ran and p["leftpad_k"] == lp.data_ptr()


def test_kernel_settings_pick_the_library(spy, lib, monkeypatch):
    """KSEEK_ATTENTION_DEFINES or _KERNEL changed: a miss, and the library of the new settings."""
    q, k, v = _t(1, 16, HQ, D), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    fn = lambda: A.flash_attn_func(q, k, v)
    kern = os.environ["KSEEK_ATTENTION_KERNEL"]
    other = abi.load(lib.path)                     # another KernelLib object of the same library
    monkeypatch.setitem(C._LIBS, f"{kern} -DX=1", other)
    monkeypatch.setitem(C._LIBS, "host-only:other", other)
    seen = spy[0]
    for env in ({}, {"KSEEK_ATTENTION_DEFINES": "X=1"}, {"KSEEK_ATTENTION_KERNEL": "host-only:other"}):
        for n, val in env.items():
            monkeypatch.setenv(n, val)
        for hit in (False, True):
            _, _, ran = _run(spy, fn)
            assert ran != hit and seen[-1][0] is (other if env else lib), env
        monkeypatch.setenv("KSEEK_ATTENTION_KERNEL", kern)
        monkeypatch.delenv("KSEEK_ATTENTION_DEFINES", raising=False)
    _, _, ran = _run(spy, fn)
    assert not ran and seen[-1][0] is lib


def test_a_library_replaced_in_the_cache_misses(spy, lib, monkeypatch):
    q, k, v = _t(1, 16, HQ, D), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    fn = lambda: A.flash_attn_func(q, k, v)
    _run(spy, fn)
    other = abi.load(lib.path)
    monkeypatch.setitem(C._LIBS, os.environ["KSEEK_ATTENTION_KERNEL"], other)
    _, _, ran = _run(spy, fn)
    assert ran and spy[0][-1][0] is other


def test_aliased_arguments_are_not_cached_but_do_not_block_the_key(spy):
    q, kv = _t(1, 16, HQ, D), _t(1, 16, HKV, D)
    k, v = _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    _, p, _ = _run(spy, lambda: A.flash_attn_func(q, kv, kv))
    assert not F.CACHE
    _, p, ran = _run(spy, lambda: A.flash_attn_func(q, kv, kv))
    assert ran
    _, p, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))   # the same key: still provable, and cached
    assert ran and (p["k"], p["v"]) == (k.data_ptr(), v.data_ptr())
    _, p, ran = _run(spy, lambda: A.flash_attn_func(q, kv, kv))
    assert not ran and p["k"] == p["v"] == kv.data_ptr()


def test_packed_qkv_views_hit_with_each_views_pointer(spy):
    for i in range(2):
        qkv = _t(1, 16, 3, HKV, D)
        _, p, ran = _run(spy, lambda: A.flash_attn_qkvpacked_func(qkv))
        assert ran == (i == 0)
        assert [p[n] for n in "qkv"] == [qkv[:, :, j].data_ptr() for j in range(3)]


def test_calls_it_cannot_prove_keep_the_slow_path(spy):
    """Copies (int64 lengths, int64 batch_idx; for an append, kv_update's int32 copy of the lengths or the
    lengths made from an int), several kernel calls, a 0-d tensor where a value is read: the slow path
    every time, with its steps."""
    q1, (kc, vc, table) = _t(4, 1, HQ, D), _paged()
    qp, kp, vp, cu = _t(6, HQ, D), _t(6, HKV, D), _t(6, HKV, D), _i32([0, 1, 2, 5, 6])
    kd, vd = _t(3, 64, HKV, D), _t(3, 64, HKV, D)
    cases = {
        "int64 lengths": lambda: A.flash_attn_with_kvcache(q1, kc, vc, cache_seqlens=torch.tensor([9, 1, 5, 7]),
                                                           page_table=table),
        "int64 batch_idx": lambda: A.flash_attn_with_kvcache(q1[:2], kd, vd, cache_seqlens=_i32([9, 1]),
                                                             cache_batch_idx=torch.tensor([2, 0])),
        "append, int64 lengths": lambda: A.flash_attn_with_kvcache(q1, kc, vc, _t(4, 1, HKV, D), _t(4, 1, HKV, D),
                                                                   cache_seqlens=torch.tensor([9, 1, 5, 7]),
                                                                   page_table=table),
        "append, int cache_seqlens": lambda: A.flash_attn_with_kvcache(q1, kc, vc, _t(4, 1, HKV, D),
                                                                       _t(4, 1, HKV, D), cache_seqlens=9,
                                                                       page_table=table),
        "dv512": lambda: A.flash_attn_func(_t(1, 8, 2, 64), _t(1, 8, 2, 64), _t(1, 8, 2, 512)),
        "0-d max_seqlen": lambda: A.flash_attn_varlen_func(qp, kp, vp, cu, cu, torch.tensor(3), 3),
        "int cache_seqlens": lambda: A.flash_attn_with_kvcache(q1, kc, vc, cache_seqlens=40, page_table=table),
    }
    built = spy[1]
    for name, fn in cases.items():
        steps = None
        for _ in range(3):
            nb = built[0]
            fn()
            assert built[0] > nb, name
            steps = steps if steps is not None else list(C.RECORD["steps"])
            assert C.RECORD["steps"] == steps, name
        assert not [e for e in F.CACHE.values() if e is not F.SLOW], name


def test_a_refusal_on_a_hit_reruns_the_slow_path_and_raises(spy, monkeypatch):
    q, k, v = _t(1, 16, HQ, D), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    fn = lambda: A.flash_attn_func(q, k, v)
    _run(spy, fn)
    monkeypatch.setattr(abi.KernelLib, "fwd", lambda self, p, stream=0: abi.ERR_UNSUPPORTED)
    with pytest.raises(NotImplementedError, match="does not support"):
        fn()
    assert not F.CACHE


def test_a_hit_issues_only_the_three_allocations(spy):
    fn = calls()["paged_decode"]
    _run(spy, fn)
    ops = H.count_ops(fn)
    assert dict(ops) == {"empty.memory_format": 3} and not H.sync_ops(ops)


def test_without_the_harness_cpu_calls_get_the_reference(lib):
    fn = calls()["dense"]
    F.clear()
    with HS.kernel_prep_on_cpu(lib):
        fn(), fn()
        assert C.RECORD["paths"] == ["prefill"] and F.CACHE
    fn()
    assert C.RECORD["paths"] == ["reference"]
    F.clear()


def test_another_16_byte_alignment_misses(spy):
    flat = torch.randn(1 * 16 * HQ * D + 8).to(torch.bfloat16)
    k, v = _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    for off, first in ((0, True), (0, False), (1, True), (8, False)):     # 8 bf16 = 16 bytes: aligned again
        q = flat[off:off + 16 * HQ * D].view(1, 16, HQ, D)
        _, p, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))
        assert ran == first and p["q"] == q.data_ptr(), off


def test_inputs_that_require_grad_keep_the_autograd_wrapper(spy):
    q, k, v = _t(1, 16, HQ, D).requires_grad_(), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    for _ in range(2):
        o, _, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))
        assert ran and o.requires_grad
    assert not F.CACHE
    with torch.no_grad():
        for first in (True, False):
            o, _, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))
            assert ran == first and not o.requires_grad


def test_a_call_overlapping_a_miss_leaves_it_unproven(spy, monkeypatch):
    """Another thread's call resets RECORD (attention_core.CALLS moves) during a miss: nothing is stored."""
    q, k, v = _t(1, 16, HQ, D), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    fwd = abi.KernelLib.fwd

    def overlapped(self, p, stream=0):
        next(C.CALLS)
        return fwd(self, p, stream)
    monkeypatch.setattr(abi.KernelLib, "fwd", overlapped)
    A.flash_attn_func(q, k, v)
    assert not F.CACHE
    monkeypatch.setattr(abi.KernelLib, "fwd", fwd)
    A.flash_attn_func(q, k, v)
    assert len(F.CACHE) == 1


def test_the_source_reads_nothing_back():
    import inspect
    import re
    code = "\n".join(line.split("#")[0] for line in inspect.getsource(F).splitlines())
    assert not re.search(r"\.(cpu|tolist|item|numpy)\(\)|synchronize", code)


def test_a_call_with_a_plan_step_that_is_not_a_view_stays_slow(spy, monkeypatch):
    """Even when every pointer is an argument's: a step (a copy, an in-place write) is not replayed."""
    from kernelseek import attention_plan
    direct = attention_plan._direct

    def stepped(p):
        C.step("writes-something")
        return direct(p)
    monkeypatch.setattr(attention_plan, "_direct", stepped)
    q, k, v = _t(1, 16, HQ, D), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    for _ in range(2):
        _, _, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))
        assert ran and C.RECORD["steps"] == ["writes-something"]
    assert list(F.CACHE.values()) == [F.SLOW]


def test_a_key_is_recorded_on_its_second_sighting(spy, monkeypatch):
    """RECORD_ON 2 (the default): a key seen once costs no recording; the second call records, the third hits."""
    monkeypatch.setattr(F, "RECORD_ON", 2)
    recorded = []
    rec = C.recording
    monkeypatch.setattr(C, "recording", lambda: recorded.append(1) or rec())
    q, k, v = _t(1, 16, HQ, D), _t(1, 16, HKV, D), _t(1, 16, HKV, D)
    for i, (slow, n_rec) in enumerate(((True, 0), (True, 1), (False, 1), (False, 1))):
        _, p, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))
        assert ran == slow and len(recorded) == n_rec and p["q"] == q.data_ptr(), i
    monkeypatch.setattr(F, "MAX_ENTRIES", 4)
    for n in range(1, 9):                         # keys seen once go first when the cache is full
        A.flash_attn_func(q[:, :n], k, v)
    assert type(F.CACHE[next(iter(F.CACHE))]) is F.Entry and len(F.CACHE) <= 4
    _, _, ran = _run(spy, lambda: A.flash_attn_func(q, k, v))
    assert not ran


# ---- appends: kv_update's launch, then kseek_fwd ---------------------------------------------------
KVU_OWN = ("q_out", "seqused_out")


def _kvu_same(a, b):
    """kseek_kv_update params equal but for the call's own allocations (q_out, seqused_out)."""
    return {k: v for k, v in a.items() if k not in KVU_OWN} == {k: v for k, v in b.items() if k not in KVU_OWN}


def _run_helper(spy, fn, helper, fast=True):
    """_run for a call with a helper launch before kseek_fwd (spy[helper]: 2 kv_update, 3 seqused_segments):
    (result, kseek_fwd params, the helper's record, slow path ran?)."""
    n = len(spy[helper])
    res, p, ran = _run(spy, fn, fast)
    assert len(spy[helper]) == n + 1, "one helper launch per call"
    return res, p, spy[helper][-1], ran


def _run_pair(spy, fn, fast=True):
    """_run for an append: (result, kseek_fwd params, kseek_kv_update record (_kvu_spy), slow path ran?)."""
    return _run_helper(spy, fn, 2, fast)


def _three_runs(spy, fn, helper, first_steps):
    """The slow path alone, a miss, a hit (_run_helper each): only the hit skips the slow path; all three note
    the same RECORD, whose steps start with first_steps, and count their path; the results have the same
    shapes, dtypes, strides and devices. -> the three runs."""
    counts = C.PATH_COUNTS.copy()
    runs, recs = [], []
    for fast in (False, True, True):
        runs.append(_run_helper(spy, fn, helper, fast))
        recs.append((list(C.RECORD["steps"]), list(C.RECORD["paths"])))
    assert [r[3] for r in runs] == [True, True, False], "the repeated call took the slow path"
    assert recs[0] == recs[1] == recs[2] and recs[0][0][:len(first_steps)] == first_steps
    assert C.PATH_COUNTS[recs[0][1][0]] - counts[recs[0][1][0]] == 3 and sum((C.PATH_COUNTS - counts).values()) == 3
    slow, hit = ((r[0],) if type(r[0]) is torch.Tensor else r[0] for r in (runs[0], runs[2]))
    assert [(a.shape, a.dtype, a.stride(), a.device) for a in slow] == [(b.shape, b.dtype, b.stride(), b.device)
                                                                        for b in hit]
    return runs


def _check_pair(spy, fn):
    """_three_runs of an append: both kernels get the slow path's params (but for their own outputs), and
    kseek_fwd reads this call's kv_update outputs (q_out when q is rotated, seqused). -> the hit's (result,
    kseek_fwd params, kv_update record)."""
    n_then = len(spy[4]) if len(spy) > 4 else 0
    runs = _three_runs(spy, fn, 2, ["kv-update"])
    if len(spy) > 4:           # aspy: the hit (and only the hit) made the pair's one call in its "one call" form
        assert len(spy[4]) - n_then == (spy[5] == "one call")
    _, p0, (k0, _, q0, used0), _ = runs[0]
    made = ("seqused_k", "q") if k0["q_out"] else ("seqused_k",)     # kseek_fwd's pointers at kv_update's outputs
    for _, p, (kp, _, q_out, used), _ in runs:
        assert _same(*({k: v for k, v in x.items() if k not in made} for x in (p0, p))) and _kvu_same(k0, kp)
        assert (p["seqused_k"], p["q"] if q_out else None) == (kp["seqused_out"], kp["q_out"])
        assert (q_out, used) == (q0, used0)
    return runs[2][0], runs[2][1], runs[2][2]


def _rope(n, half, dtype=torch.bfloat16, g=None):
    ang = torch.rand(n, half, generator=g) * 6.283
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def append_calls():
    """name -> (args, kwargs) of an append (flash_attn_with_kvcache with k, v): FA3's append layouts (the
    fa3api rows append_rotary_prefill, append_plain_varlen, append_rotary_decode, and more)."""
    g = torch.Generator().manual_seed(1)
    q, kc, vc = _t(2, 9, HQ, D, g=g), _t(2, 64, HKV, D, g=g), _t(2, 64, HKV, D, g=g)
    kn, vn = _t(2, 9, HKV, D, g=g), _t(2, 9, HKV, D, g=g)
    cos, sin = _rope(80, 32, g=g)
    qp, kpn, vpn = _t(9, HQ, D, g=g), _t(9, HKV, D, g=g), _t(9, HKV, D, g=g)
    kpc, vpc, table = _paged(3, 4, 16)
    q1, kn1, vn1 = _t(4, 1, HQ, D, g=g), _t(4, 1, HKV, D, g=g), _t(4, 1, HKV, D, g=g)
    k4, v4, table4 = _paged(4, 6, 16)
    cos4, sin4 = _rope(100, 64, g=g)
    cosf, sinf = _rope(80, 16, torch.float32, g=g)
    ql, kl, vl = _t(33, HQ, D, g=g), _t(33, HKV, D, g=g), _t(33, HKV, D, g=g)
    f8 = torch.float8_e4m3fn
    q8, kn8, vn8, (k8, v8, t8) = _t(2, 1, HQ, D, dtype=f8), _t(2, 1, HKV, D, dtype=f8), _t(2, 1, HKV, D, dtype=f8), \
        _paged(2, 4, 16, f8)
    ds = [torch.rand(2, HKV) + 0.5 for _ in range(3)]
    return {
        "rotary_dense": ((q, kc, vc, kn, vn), dict(rotary_cos=cos, rotary_sin=sin, cache_seqlens=_i32([3, 40]),
                                                   causal=True, return_softmax_lse=True)),
        "plain_varlen_paged": ((qp, kpc, vpc, kpn, vpn), dict(cache_seqlens=_i32([0, 17, 40]), page_table=table,
                                                              cu_seqlens_q=_i32([0, 3, 4, 9]),
                                                              cu_seqlens_k_new=_i32([0, 3, 4, 9]), max_seqlen_q=5,
                                                              causal=True)),
        "rotary_decode_paged_out": ((q1, k4, v4, kn1, vn1),
                                    dict(rotary_cos=cos4, rotary_sin=sin4, cache_seqlens=_i32([95, 1, 50, 17]),
                                         page_table=table4, rotary_interleaved=False, num_splits=3,
                                         out=torch.empty(4, 1, HQ, D, dtype=torch.bfloat16), return_softmax_lse=True)),
        "rotary_neox_batch_idx": ((q[:, :4], _t(3, 64, HKV, D, g=g), _t(3, 64, HKV, D, g=g), kn[:, :4], vn[:, :4]),
                                  dict(rotary_cos=cosf, rotary_sin=sinf, cache_seqlens=_i32([5, 30]),
                                       cache_batch_idx=_i32([2, 0]), rotary_seqlens=_i32([1, 7]),
                                       rotary_interleaved=False)),
        "rotary_varlen_dense": ((ql, _t(3, 64, HKV, D, g=g), _t(3, 64, HKV, D, g=g), kl, vl),
                                dict(rotary_cos=cos, rotary_sin=sin, cache_seqlens=_i32([5, 0, 30]),
                                     cu_seqlens_q=_i32([0, 20, 21, 33]), cu_seqlens_k_new=_i32([0, 20, 21, 33]),
                                     max_seqlen_q=20, causal=True)),
        "fp8_paged": ((q8, k8, v8, kn8, vn8), dict(cache_seqlens=_i32([60, 3]), page_table=t8, q_descale=ds[0],
                                                   k_descale=ds[1], v_descale=ds[2])),
    }


def _append(spec):
    args, kw = spec
    return lambda: A.flash_attn_with_kvcache(*args, **kw)


@pytest.mark.parametrize("name", sorted(append_calls()))
def test_an_append_hit_gives_both_kernels_the_slow_paths_params(aspy, name):
    spec = append_calls()[name]
    res, p, (kp, _, q_out, _) = _check_pair(aspy, _append(spec))
    assert (q_out is not None) == name.startswith("rotary")
    if name == "rotary_neox_batch_idx":
        assert C.RECORD["steps"] == ["kv-update", "batch-idx-as-pages"]
    if name == "rotary_decode_paged_out":
        assert res[0] is spec[1]["out"] and p["o"] != res[0].data_ptr()


@contextlib.contextmanager
def _torch_append():
    """Within: kv_update takes no CPU tensor, so the append runs attention_cache's torch ops."""
    kv_update.DEVICE_TYPES.discard("cpu")
    try:
        yield
    finally:
        kv_update.DEVICE_TYPES.add("cpu")


@pytest.mark.parametrize("name", sorted(append_calls()))
def test_an_append_hit_updates_the_cache_as_the_torch_path_does(aspy, name):
    """Numbers: from the same caches, a hit's kv_update (the host-only build runs the kernel's work on the
    host) writes the caches bit for bit as attention_cache's torch ops do, and its q_out and seqused (what
    the hit's kseek_fwd is pointed at) hold the torch path's rotated q and key ends."""
    (args, kw) = spec = append_calls()[name]
    fn, caches = _append(spec), args[1:3]
    before = [c.clone() for c in caches]
    with _torch_append():
        fn()
        assert "append-kv" in C.RECORD["steps"] and list(F.CACHE.values()) == [F.SLOW]   # torch ops: not replayed
    F.clear()
    want = [c.clone() for c in caches]
    _run_pair(aspy, fn)
    for c, b in zip(caches, before):
        c.copy_(b)
    _, p, (kp, _, q_out, used), ran = _run_pair(aspy, fn)
    assert not ran
    for c, w, b in zip(caches, want, before):
        assert torch.equal(c.view(torch.uint8), w.view(torch.uint8))
        assert not torch.equal(c.view(torch.uint8), b.view(torch.uint8))
    cu_new = kw.get("cu_seqlens_k_new")
    new = cu_new[1:] - cu_new[:-1] if cu_new is not None else args[3].shape[1]
    assert torch.frombuffer(bytearray(used), dtype=torch.int32).tolist() == (kw["cache_seqlens"] + new).tolist()
    if q_out is not None:
        per_row = bool(kw.get("causal"))
        rq = attention_cache.rotate_q(args[0], kw["rotary_cos"], kw["rotary_sin"],
                                      kw.get("rotary_seqlens", kw["cache_seqlens"]), kw.get("cu_seqlens_q"), per_row,
                                      kw.get("rotary_interleaved", True))
        assert q_out == rq.contiguous().view(torch.uint8).numpy().tobytes()
        assert q_out != args[0].contiguous().view(torch.uint8).numpy().tobytes()


def test_every_part_of_an_append_key_misses(aspy):
    """Each variant of a cached append misses once, then hits, and both kernels get the slow path's params."""
    (q, kc, vc, kn, vn), kw = append_calls()["rotary_dense"]
    cos, sin = kw["rotary_cos"], kw["rotary_sin"]
    variants = {"base": {}, "neox": dict(rotary_interleaved=False), "no_rotary": dict(rotary_cos=None, rotary_sin=None),
                "per_seq_rotary": dict(causal=False), "window": dict(window_size=(8, 0)),
                "cos_f32": dict(rotary_cos=cos.float(), rotary_sin=sin.float()),
                "cos_rows": dict(rotary_cos=cos[:70], rotary_sin=sin[:70]), "rotary_dim": dict(rotary_cos=cos[:, :16],
                                                                                              rotary_sin=sin[:, :16]),
                "rotary_seqlens": dict(rotary_seqlens=_i32([0, 5])), "no_lse": dict(return_softmax_lse=False)}
    shapes = {"new_rows": (q, kc, vc, kn[:, :8], vn[:, :8]), "q_rows": (q[:, :8], kc, vc, kn, vn),
              "fp16": tuple(x.half() for x in (q, kc, vc, kn, vn))}
    kvus = set()
    for name, (args, extra) in {**{n: ((q, kc, vc, kn, vn), v) for n, v in variants.items()},
                                **{n: (a, {}) for n, a in shapes.items()}}.items():
        kw2 = dict(kw, **extra)
        if name == "fp16":
            kw2.update(rotary_cos=cos.half(), rotary_sin=sin.half())
        _, _, (kp, *_) = _check_pair(aspy, lambda: A.flash_attn_with_kvcache(*args, **kw2))
        kvus.add(tuple(sorted((k, v) for k, v in kp.items() if k not in KVU_OWN)))
    assert len(F.CACHE) == len(variants) + len(shapes) and all(type(e) is F.Entry for e in F.CACHE.values())
    assert len(kvus) >= len(variants) + len(shapes) - 3   # window, causal and lse give kv_update the same params


def test_new_tensors_of_the_same_layout_hit_an_append_with_their_own_pointers(aspy):
    g = torch.Generator().manual_seed(2)
    cos, sin = _rope(80, 32, g=g)
    for i in range(3):
        q, kc, vc = _t(2, 9, HQ, D, g=g), _t(2, 64, HKV, D, g=g), _t(2, 64, HKV, D, g=g)
        kn, vn, lens = _t(2, 9, HKV, D, g=g), _t(2, 9, HKV, D, g=g), _i32([3 + i, 40])
        _, p, (kp, _, q_out, _), ran = _run_pair(aspy, lambda: A.flash_attn_with_kvcache(
            q, kc, vc, kn, vn, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lens, causal=True))
        assert ran == (i == 0)
        assert [kp[n] for n in ("q", "k_new", "v_new", "k_cache", "v_cache", "seqlens", "ro", "cos", "sin")] == \
            [x.data_ptr() for x in (q, kn, vn, kc, vc, lens, lens, cos, sin)]
        assert (p["k"], p["v"], p["q"], p["seqused_k"]) == (kc.data_ptr(), vc.data_ptr(), kp["q_out"], kp["seqused_out"])
        rq = attention_cache.rotate_q(q, cos, sin, lens, None, True, True)
        assert q_out == rq.view(torch.uint8).numpy().tobytes()


def test_an_aliased_append_is_not_cached_but_does_not_block_the_key(aspy):
    """rotary_seqlens the very tensor cache_seqlens is, or k and v new one tensor: which argument a pointer
    came from is ambiguous, so nothing is stored; the same key with distinct tensors is cached."""
    (q, kc, vc, kn, vn), kw = append_calls()["rotary_dense"]
    lens = kw["cache_seqlens"]
    cases = [((q, kc, vc, kn, vn), dict(kw, rotary_seqlens=lens), dict(kw, rotary_seqlens=lens.clone())),
             ((q, kc, vc, kn, kn), kw, None)]
    for args, aliased, distinct in cases:
        for _ in range(2):
            _, _, _, ran = _run_pair(aspy, lambda: A.flash_attn_with_kvcache(*args, **aliased))
            assert ran and not F.CACHE
        args2 = args[:4] + (vn,) if distinct is None else args
        for first in (True, False):
            _, _, _, ran = _run_pair(aspy, lambda: A.flash_attn_with_kvcache(*args2, **(distinct or aliased)))
            assert ran == first
        _, _, (kp, *_), ran = _run_pair(aspy, lambda: A.flash_attn_with_kvcache(*args, **aliased))
        assert not ran and (kp["k_new"], kp["v_new"], kp["ro"]) == (args[3].data_ptr(), args[4].data_ptr(),
                                                                      aliased.get("rotary_seqlens", lens).data_ptr())
        F.clear()


def test_an_append_it_cannot_prove_keeps_the_slow_path(aspy):
    """The torch-op append (kv_update takes no such call), and an append whose plan gathers the pages
    (fp8 packed queries over a paged cache): the slow path every time."""
    (q, kc, vc, kn, vn), kw = append_calls()["rotary_dense"]
    (_, k8, v8, kn8, vn8), kw8 = append_calls()["fp8_paged"]
    q8 = _t(2, HQ, D, dtype=torch.float8_e4m3fn)
    cases = {"torch append": lambda: A.flash_attn_with_kvcache(q, kc, vc, kn, vn, **kw),
             "gathered pages": lambda: A.flash_attn_with_kvcache(q8, k8, v8, kn8.view(2, HKV, D), vn8.view(2, HKV, D),
                                                                 cu_seqlens_q=_i32([0, 1, 2]), max_seqlen_q=1,
                                                                 cu_seqlens_k_new=_i32([0, 1, 2]), **kw8)}
    built = aspy[1]
    for name, fn in cases.items():
        with _torch_append() if name == "torch append" else contextlib.nullcontext():
            for _ in range(3):
                nb = built[0]
                fn()
                assert built[0] > nb, name
            assert list(F.CACHE.values()) == [F.SLOW], name
        F.clear()
    assert "gather-pages" in C.RECORD["steps"] and C.RECORD["steps"][0] == "kv-update"


def test_a_replaced_or_refusing_kv_update_library_reruns_the_slow_path(aspy, kvu_lib):
    """Another kv_update function than the entry's: a miss (and a new entry). One that refuses on a hit:
    the entry goes and the slow path raises kv_update's error. (aspy restores kv_update._LIB.)"""
    fn = _append(append_calls()["rotary_dense"])
    _check_pair(aspy, fn)
    kv_update._LIB[0] = _kvu_spy(kvu_lib, aspy[2])          # the same library, another function object
    for slow in (True, True, False):                       # the entry goes; recorded again; a hit
        _, _, _, ran = _run_pair(aspy, fn)
        assert ran == slow
    kv_update._LIB[0] = lambda p, stream: 2
    with pytest.raises(RuntimeError, match="returned status 2"):
        fn()
    assert not F.CACHE


def test_a_kernel_refusal_after_the_update_reruns_the_slow_path_whose_update_writes_the_same(aspy, monkeypatch):
    """kseek_fwd refuses on a hit whose kv_update has run: the slow path runs the call again (the update
    writes the same rows again) and raises the kernel's error."""
    (args, kw) = spec = append_calls()["plain_varlen_paged"]
    fn = _append(spec)
    _check_pair(aspy, fn)
    after = [c.clone() for c in args[1:3]]
    n = len(aspy[2])
    monkeypatch.setattr(abi.KernelLib, "fwd", lambda self, p, stream=0: abi.ERR_UNSUPPORTED)
    with pytest.raises(NotImplementedError, match="does not support"):
        fn()
    assert len(aspy[2]) == n + 2 and not F.CACHE
    assert all(torch.equal(c.view(torch.uint8), a.view(torch.uint8)) for c, a in zip(args[1:3], after))


@pytest.mark.parametrize("name, n", [("rotary_dense", 4), ("plain_varlen_paged", 4)])
def test_an_append_hit_issues_only_its_allocations(aspy, name, n):
    """One buffer for kv_update's outputs (seqused, and q_out when q is rotated), o, lse, workspace: nothing
    else, and no sync. In one call, kv_update's outputs and the workspace share one buffer."""
    fn = _append(append_calls()[name])
    _check_pair(aspy, fn)
    ops = H.count_ops(fn)
    assert dict(ops) == {"empty.memory_format": n - (aspy[5] == "one call")} and not H.sync_ops(ops)


def test_a_workspace_that_depends_on_more_than_alignment_keeps_the_slow_path(aspy, monkeypatch):
    """In one call the workspace is sized with kv_update's outputs at a stand-in address, then asked again at
    the real one: a library whose size moves with the address (here: q in [2**40, 2**41), where the stand-in
    lies and no real buffer here does, asks for less)
    never gets the shorter workspace; the hit gives up and the slow path runs, every time."""
    fn = _append(append_calls()["rotary_dense"])
    _check_pair(aspy, fn)
    monkeypatch.setattr(abi.KernelLib, "workspace_bytes", lambda self, p: 1 << 12 if p.q >> 40 == 1 else 1 << 16)
    for _ in range(3):
        _, p, _, ran = _run_pair(aspy, fn)
        assert p["workspace_bytes"] >= 1 << 16
        assert ran == (aspy[5] == "one call")


def test_the_pairs_one_call_reports_a_refused_update_and_skips_the_kernel(kvu_lib):
    """kseek_kv_update_then itself (the host-only build of kernels/kv_update.cu's): an update that refuses
    (ABI 0) gives 1000 + its status and kseek_fwd is not called; a good update gives kseek_fwd's status."""
    then, called = kv_update.then_of(kvu_lib), []

    @_FWD_CB
    def fwd(p, stream):
        called.append(p)
        return 4
    u, fp = KvuParams(), abi.KseekParams()
    assert then(ctypes.byref(u), ctypes.cast(fwd, ctypes.c_void_p), ctypes.byref(fp), None) == 1001 and not called
    assert then(ctypes.byref(u), None, ctypes.byref(fp), None) == 1002 and not called
    seqlens = torch.zeros(2, dtype=torch.int32)
    u.abi_version, u.batch, u.head_dim, u.head_dim_v, u.seqlens = kv_update.ABI_VERSION, 2, 128, 128, seqlens.data_ptr()
    assert then(ctypes.byref(u), ctypes.cast(fwd, ctypes.c_void_p), ctypes.byref(fp), None) == 4
    assert called == [ctypes.addressof(fp)]


@pytest.mark.parametrize("step, first", [("kv-update", "writes-something"), ("seqused-q-segments", "packed")])
def test_a_helper_launch_not_noted_as_its_step_stays_slow(spy, monkeypatch, step, first):
    """A pair is proven only when its first launch is noted as that launch's steps ("kv-update"; "packed",
    "seqused-q-segments") and every other step is a view: here the launch is noted as a step that writes,
    so nothing is replayed."""
    note = C.step
    monkeypatch.setattr(C, "step", lambda name: note("writes-something" if name == step else name))
    fn = _append(append_calls()["rotary_dense"]) if step == "kv-update" else seqused_calls()["causal"]
    for _ in range(3):
        _, _, _, ran = _run_helper(spy, fn, 2 if step == "kv-update" else 3)
        assert ran and C.RECORD["steps"][:1] == [first] and "writes-something" in C.RECORD["steps"]
    assert list(F.CACHE.values()) == [F.SLOW]


# ---- seqused_q: seqused_segments' launch, then kseek_fwd ------------------------------------------
SEG_STEPS = ["packed", "seqused-q-segments"]
SEG_FWD = ("cu_seqlens_q", "cu_seqlens_k", "seqused_k")   # kseek_fwd's pointers at the segments' cu_q2, cu_k2, used2


def _run_seg(spy, fn, fast=True):
    """_run for a seqused_q call: (result, kseek_fwd params, kseek_seqused_segments record (_seg_spy), ran?)."""
    return _run_helper(spy, fn, 3, fast)


def _seg_views(a):
    """The addresses of cu_q2, cu_k2 and used2 in the segments' out [6B+2] (seqused_segments.segments' views)."""
    return [a["out"] + 4 * i * (2 * a["batch"] + 1) for i in range(3)]


def _check_seg(spy, fn):
    """_three_runs of a seqused_q call: seqused_segments gets the slow path's arguments (but its own out) and
    writes the same; kseek_fwd gets the slow path's params but for cu_seqlens_q/_k and seqused_k, which are
    this call's segments (views of that out). -> the hit's (result, kseek_fwd params, segments record)."""
    runs = _three_runs(spy, fn, 3, SEG_STEPS)
    _, p0, (a0, _, out0), _ = runs[0]
    for _, p, (a, stream, out), _ in runs:
        assert {k: v for k, v in a.items() if k != "out"} == {k: v for k, v in a0.items() if k != "out"}
        assert _same(*({k: v for k, v in x.items() if k not in SEG_FWD} for x in (p0, p)))
        assert [p[f] for f in SEG_FWD] == _seg_views(a) and out == out0 and not stream
    return runs[2][0], runs[2][1], runs[2][2]


def _grid_row_call():
    """The fa3api row seqused_q_varlen (shrunk 16x, as tools/hostcost.py runs it) as the grid binds it."""
    from kernelseek import fa3api_grid as G
    return H.bound_call(G.make_call(H.grid_rows(16, "^seqused_q_varlen$")[0], seed=0, device="cpu"))


def seqused_calls():
    """name -> a no-argument flash_attn_varlen_func call with seqused_q (its tensors made once)."""
    g = torch.Generator().manual_seed(4)
    q, k, v = _t(31, HQ, D, g=g), _t(47, HKV, D, g=g), _t(47, HKV, D, g=g)
    cu_q, cu_k, used_q, used_k = _i32([0, 5, 30, 31]), _i32([0, 9, 40, 47]), _i32([3, 40, 0]), _i32([9, 2, 7])
    out, sinks = torch.empty(31, HQ, D, dtype=torch.bfloat16), torch.randn(HQ)
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    return {
        "grid_row": _grid_row_call(),
        "causal": lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31, seqused_q=used_q, causal=True),
        "seqused_k_lse": lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31, seqused_q=used_q,
                                                          seqused_k=used_k, return_attn_probs=True),
        "window_sinks_out": lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31, seqused_q=used_q,
                                                             window_size=(8, 0), s_aux=sinks, out=out),
        "fp8_no_descales": lambda: A.flash_attn_varlen_func(q8, k8, v8, cu_q, cu_k, 25, 31, seqused_q=used_q,
                                                            causal=True),
    }


@pytest.mark.parametrize("name", sorted(seqused_calls()))
def test_a_seqused_q_hit_gives_both_kernels_the_slow_paths_params(spy, name):
    fn = seqused_calls()[name]
    res, p, (a, _, _) = _check_seg(spy, fn)
    assert a["used_k"] is None if name != "seqused_k_lse" else a["used_k"]
    if name == "window_sinks_out":
        assert p["o"] != res.data_ptr()               # out= gets a copy of the kernel's o, as on the slow path


def _torch_segments(cu_q, used_q, cu_k, used_k):
    """The bytes of attention_plan's torch composition of the segments (cu_q2, cu_k2, used2 in a row)."""
    from kernelseek import attention_plan as P
    from kernelseek import seqused_segments as S
    S.DEVICE_TYPES.discard("cpu")
    try:
        p = P.Problem(q=None, k=None, v=None, kv="packed", batch=cu_q.numel() - 1, max_q=1, max_k=1, scale=1.0,
                      seqused_q=used_q)
        return torch.cat(P._seqused_segments(p, cu_q, cu_k, used_k if used_k is not None else cu_k[1:] - cu_k[:-1])[:3]) \
            .to(torch.int32).numpy().tobytes()
    finally:
        S.DEVICE_TYPES.add("cpu")


def test_new_seqused_q_tensors_hit_with_their_own_pointers_and_segments(spy):
    """Other tensors of the same layout (new lengths): a hit, each launch pointed at this call's tensors, and
    the segments the hit's kseek_fwd reads are the torch composition's of this call's lengths."""
    g = torch.Generator().manual_seed(5)
    for i in range(3):
        q, k, v = _t(31, HQ, D, g=g), _t(47, HKV, D, g=g), _t(47, HKV, D, g=g)
        cu_q, cu_k, used_q = _i32([0, 5 + i, 30, 31]), _i32([0, 9, 40 - i, 47]), _i32([3 - i, 40, i])
        _, p, (a, _, out), ran = _run_seg(spy, lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31,
                                                                                seqused_q=used_q, causal=True))
        assert ran == (i == 0)
        assert [a[n] for n in ("cu_q", "seqused_q", "cu_k")] == [x.data_ptr() for x in (cu_q, used_q, cu_k)]
        assert [p[n] for n in "qkv"] == [x.data_ptr() for x in (q, k, v)] and [p[f] for f in SEG_FWD] == _seg_views(a)
        assert out == _torch_segments(cu_q, used_q, cu_k, None)


def test_every_part_of_a_seqused_q_key_misses(spy):
    """Each variant of a cached seqused_q call misses once, then hits, and both kernels get its slow path's params."""
    g = torch.Generator().manual_seed(6)
    q, k, v = _t(31, HQ, D, g=g), _t(47, HKV, D, g=g), _t(47, HKV, D, g=g)
    cu_q, cu_k, used_q = _i32([0, 5, 30, 31]), _i32([0, 9, 40, 47]), _i32([3, 40, 0])
    base = dict(seqused_q=used_q, causal=True)
    variants = {"base": ((q, k, v, cu_q, cu_k, 25, 31), base),
                "seqused_k": ((q, k, v, cu_q, cu_k, 25, 31), dict(base, seqused_k=_i32([9, 2, 7]))),
                "not_causal": ((q, k, v, cu_q, cu_k, 25, 31), dict(base, causal=False)),
                "window": ((q, k, v, cu_q, cu_k, 25, 31), dict(base, window_size=(8, 0))),
                "max_seqlen": ((q, k, v, cu_q, cu_k, 26, 31), base),
                "batch": ((q, k, v, _i32([0, 5, 31]), _i32([0, 9, 47]), 26, 38), dict(base, seqused_q=_i32([3, 9]))),
                "rows": ((q[:30], k, v, cu_q, cu_k, 25, 31), base),
                "fp16": ((q.half(), k.half(), v.half(), cu_q, cu_k, 25, 31), base)}
    segs = set()
    for name, (args, kw) in variants.items():
        _, _, (a, _, _) = _check_seg(spy, lambda: A.flash_attn_varlen_func(*args, **kw))
        segs.add((a["batch"], a["used_k"] is None))
    assert len(F.CACHE) == len(variants) and all(type(e) is F.Entry for e in F.CACHE.values())
    assert segs == {(3, True), (3, False), (2, True)}


def test_an_aliased_seqused_q_call_is_not_cached_but_does_not_block_the_key(spy):
    """cu_seqlens_q the very tensor cu_seqlens_k is: which argument the segments' pointers came from is
    ambiguous, so nothing is stored; the same key with distinct tensors is cached, and then serves it."""
    q, k, v, cu, used_q = _t(31, HQ, D), _t(31, HKV, D), _t(31, HKV, D), _i32([0, 5, 30, 31]), _i32([3, 40, 0])
    fn = lambda cu_k: A.flash_attn_varlen_func(q, k, v, cu, cu_k, 25, 25, seqused_q=used_q)   # noqa: E731
    for _ in range(2):
        _, _, _, ran = _run_seg(spy, lambda: fn(cu))
        assert ran and not F.CACHE
    for first in (True, False):
        _, _, _, ran = _run_seg(spy, lambda: fn(cu.clone()))
        assert ran == first
    _, p, (a, _, _), ran = _run_seg(spy, lambda: fn(cu))
    assert not ran and a["cu_q"] == a["cu_k"] == cu.data_ptr()


def test_a_seqused_q_call_it_cannot_prove_keeps_the_slow_path(spy):
    """Copies (int64 seqused_q or cu_seqlens, fp8 descales repeated per segment) and the torch ops (a seqused_q
    the kernel does not take: not contiguous): the slow path every time, with its steps."""
    q, k, v = _t(31, HQ, D), _t(47, HKV, D), _t(47, HKV, D)
    cu_q, cu_k, used_q = _i32([0, 5, 30, 31]), _i32([0, 9, 40, 47]), _i32([3, 40, 0])
    f8, ds = torch.float8_e4m3fn, [torch.rand(3, HKV) + 0.5 for _ in range(3)]
    cases = {"int64 seqused_q": lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31, seqused_q=used_q.long()),
             "int64 cu_seqlens_k": lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k.long(), 25, 31, seqused_q=used_q),
             "fp8 descales": lambda: A.flash_attn_varlen_func(q.to(f8), k.to(f8), v.to(f8), cu_q, cu_k, 25, 31,
                                                              seqused_q=used_q, q_descale=ds[0], k_descale=ds[1],
                                                              v_descale=ds[2]),
             "strided seqused_q": lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31,
                                                                   seqused_q=_i32([3, 0, 40, 0, 0, 0])[::2])}
    built, segs = spy[1], spy[3]
    for name, fn in cases.items():
        for _ in range(3):
            nb, ns = built[0], len(segs)
            fn()
            assert built[0] > nb and C.RECORD["steps"] == SEG_STEPS, name
            assert len(segs) == ns + (name != "strided seqused_q"), name
        assert list(F.CACHE.values()) == [F.SLOW], name
        F.clear()


def test_a_replaced_or_refusing_segments_library_reruns_the_slow_path(spy, seg_lib):
    """Another segments function than the entry's: a miss (and a new entry). One that refuses on a hit: the
    entry goes and the slow path raises seqused_segments' error. (spy restores seqused_segments._LIB.)"""
    from kernelseek import seqused_segments as S
    fn = seqused_calls()["causal"]
    _check_seg(spy, fn)
    S._LIB[0] = _seg_spy(seg_lib, spy[3])
    for slow in (True, True, False):
        _, _, _, ran = _run_seg(spy, fn)
        assert ran == slow
    S._LIB[0] = lambda *a: 2
    with pytest.raises(RuntimeError, match="returned status 2"):
        fn()
    assert not F.CACHE


@pytest.mark.parametrize("name", ["grid_row", "seqused_k_lse"])
def test_a_seqused_q_hit_issues_only_its_four_allocations(spy, name):
    """The segments' out, o, lse, workspace: nothing else (the plan's other torch ops are gone), and no sync."""
    fn = seqused_calls()[name]
    _check_seg(spy, fn)
    ops = H.count_ops(fn)
    assert dict(ops) == {"empty.memory_format": 4} and not H.sync_ops(ops)
