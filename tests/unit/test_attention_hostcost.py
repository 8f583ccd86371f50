"""kernelseek.attention's host path, on CPU tensors through the CUDA path's host code
(host_standins.kernel_prep_on_cpu, a host-only kseek.h library built by nvcc):

* the common calls issue no op that syncs with the host on CUDA (item/int of a tensor, nonzero,
  boolean masks, tensors built from Python data), and their sources read nothing back;
* a dense call issues at most the ops it does today (a regression that adds ops fails here);
* the harness itself: it runs the kernel path (not the reference), its detector catches syncs, and
  its stage times add up.
"""
import inspect
import re

import pytest
import torch

from kernelseek import abi
from kernelseek import attention as A
from kernelseek import attention_cache, attention_fastpath, attention_plan
from kernelseek import attention_core as C
from kernelseek import attention_hostcost as H
from kernelseek import host_standins as HS

HQ, HKV, D = 8, 2, 128
# A dense bf16 call's ops today: q/k/v are passed as they are; the outputs (o, lse) and the workspace
# are the only allocations, and nothing else runs (session 9: 3 ops, none launching a kernel).
DENSE_MAX_OPS, DENSE_MAX_LAUNCH_OPS = 3, 0


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return HS.host_lib(tmp_path_factory.mktemp("hostonly"))


def _t(g, *shape, dtype=torch.bfloat16):
    return torch.randn(*shape, generator=g).to(dtype)


def _i32(x):
    return torch.tensor(x, dtype=torch.int32)


def dense_prefill(g):
    q, k, v = _t(g, 2, 33, HQ, D), _t(g, 2, 40, HKV, D), _t(g, 2, 40, HKV, D)
    return lambda: A.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)


def varlen(g):
    cu_q, cu_k = _i32([0, 5, 30, 31]), _i32([0, 9, 40, 47])
    q, k, v = _t(g, 31, HQ, D), _t(g, 47, HKV, D), _t(g, 47, HKV, D)
    return lambda: A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 25, 31, causal=True, return_attn_probs=True)


def _paged(g, b=4, pages=6, ps=16):
    n = b * pages
    table = torch.randperm(n, generator=g).view(b, pages).to(torch.int32)
    return _t(g, n, ps, HKV, D), _t(g, n, ps, HKV, D), table


def decode_paged(g):
    kc, vc, table = _paged(g)
    q, lens = _t(g, 4, 1, HQ, D), _i32([96, 1, 50, 17])
    return lambda: A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, page_table=table, causal=True,
                                             return_softmax_lse=True)


def varlen_q_paged(g, rows=(1, 1, 3, 1)):
    """vLLM's mixed batch: varlen queries over a paged cache (decode-shaped: one call on the decode path; else in place or packed)."""
    kc, vc, table = _paged(g)
    cu = _i32([0] + torch.tensor(rows).cumsum(0).tolist())
    q, lens = _t(g, sum(rows), HQ, D), _i32([96, 40, 50, 17])
    return lambda: A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, page_table=table, cu_seqlens_q=cu,
                                             max_seqlen_q=max(rows), causal=True, return_softmax_lse=True)


def append_rotary_decode(g):
    kc, vc, table = _paged(g)
    q, kn, vn, lens = _t(g, 4, 1, HQ, D), _t(g, 4, 1, HKV, D), _t(g, 4, 1, HKV, D), _i32([95, 1, 50, 17])
    ang = torch.rand(96, 32, generator=g) * 6.283
    cos, sin = torch.cos(ang).to(torch.bfloat16), torch.sin(ang).to(torch.bfloat16)
    return lambda: A.flash_attn_with_kvcache(q, kc, vc, kn, vn, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lens,
                                             page_table=table, causal=True, rotary_interleaved=False)


def chunked(g):
    q, k, v = _t(g, 1, 70, HQ, D), _t(g, 1, 70, HKV, D), _t(g, 1, 70, HKV, D)
    return lambda: A.flash_attn_func(q, k, v, causal=True, attention_chunk=32)


COMMON = {"dense_prefill": dense_prefill, "varlen": varlen, "decode_paged": decode_paged,
          "varlen_q_paged_decode": varlen_q_paged,
          "varlen_q_paged_prefill": lambda g: varlen_q_paged(g, rows=(1, 40, 1, 9)),
          "append_rotary_decode": append_rotary_decode, "chunked": chunked}


@pytest.mark.parametrize("name", sorted(COMMON))
def test_common_calls_issue_no_host_sync(lib, name):
    fn = COMMON[name](torch.Generator().manual_seed(7))
    with HS.kernel_prep_on_cpu(lib):
        ops = H.count_ops(fn)
        assert C.RECORD["paths"] and set(C.RECORD["paths"]) == {"prefill"}   # the kernel path ran (stub: 2)
    assert sum(ops.values()) > 0
    assert not H.sync_ops(ops), f"{name}: ops that sync on CUDA: {dict(H.sync_ops(ops))}"


def test_dense_call_op_count_stays_at_its_budget(lib):
    fn = dense_prefill(torch.Generator().manual_seed(1))
    with HS.kernel_prep_on_cpu(lib):
        ops = H.count_ops(fn)
    assert sum(ops.values()) <= DENSE_MAX_OPS, dict(ops)
    assert H.launch_ops(ops) <= DENSE_MAX_LAUNCH_OPS, dict(ops)
    assert ops["empty.memory_format"] == 3                       # o, lse, workspace


def test_varlen_queries_over_a_dense_cache_compute_nothing(lib):
    """Varlen queries over a dense cache: the kernel reads the cache in place (its decode and prefill
    paths split the batch on the device), with cu_seqlens_q and cache_seqlens as they are: no plan step,
    no torch op launched on the device besides the outputs."""
    g = torch.Generator().manual_seed(3)
    kc, vc = _t(g, 3, 64, HKV, D), _t(g, 3, 64, HKV, D)
    q, cu, lens = _t(g, 50, HQ, D), _i32([0, 1, 45, 50]), _i32([60, 64, 7])
    with HS.kernel_prep_on_cpu(lib):
        ops = H.count_ops(lambda: A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, cu_seqlens_q=cu,
                                                            max_seqlen_q=44, causal=True))
        assert C.RECORD["steps"] == []
    assert "arange" not in ops and "mul.Tensor" not in ops, dict(ops)


def test_sync_detector_catches_what_syncs_on_cuda():
    x = torch.arange(6.0) - 2
    cases = {"_local_scalar_dense": lambda: int(x.max()), "index.Tensor[bool]": lambda: x[x > 0],
             "nonzero": lambda: torch.where(x > 0), "lift_fresh": lambda: torch.tensor([1, 2]),
             "index_put_[bool]": lambda: x.clone().__setitem__(x > 0, 0.0)}
    for op, f in cases.items():
        assert op in H.sync_ops(H.count_ops(f)), op
    assert not H.sync_ops(H.count_ops(lambda: x[torch.arange(2)] + x[:2].to(torch.int32)))   # long index: no sync


def test_sources_read_nothing_back():
    """What the dispatch mode cannot see on CPU tensors (.cpu(), .tolist(), .item(), .numpy() are no
    ops there) must not be in the plan, the cache update or the kernel path's host code."""
    srcs = {m.__name__: inspect.getsource(m) for m in (A, attention_plan, attention_cache)}
    srcs["_run_kernel"] = inspect.getsource(C._run_kernel)
    for name, src in srcs.items():
        code = "\n".join(line.split("#")[0] for line in src.splitlines())
        assert not re.search(r"\.(cpu|tolist|item|numpy)\(\)", code), name


def test_outside_the_context_cpu_calls_get_the_reference_again(lib):
    fn = dense_prefill(torch.Generator().manual_seed(2))
    with HS.kernel_prep_on_cpu(lib):
        fn()
        assert C.RECORD["paths"] == ["prefill"]
    o, lse = fn()
    assert C.RECORD["paths"] == ["reference"] and torch.isfinite(o.float()).all()


def test_launch_fills_params_once_and_points_them_at_the_workspace(lib):
    """abi.Launch builds one struct: the same fields make_params gives with that workspace."""
    fn = dense_prefill(torch.Generator().manual_seed(4))
    seen = []
    real = abi.Launch.__init__

    def keep(self, *a, **kw):
        real(self, *a, **kw)
        seen.append(self)
    abi.Launch.__init__ = keep
    try:
        with HS.kernel_prep_on_cpu(lib):
            fn()
    finally:
        abi.Launch.__init__ = real
    (call,) = seen
    assert call.workspace.numel() == abi.MIN_WORKSPACE_BYTES and call.params.workspace == call.workspace.data_ptr()
    ref = abi.make_params(_scenario_of(call), call.inp, call.o, call.lse, call.workspace)
    assert call.params.to_dict() == ref.to_dict()


def _scenario_of(call):
    p = call.params
    return C._Call(p.batch, p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v, p.seqlen_q, p.seqlen_k, bool(p.causal),
                   (p.window_left, p.window_right), p.softcap, p.scale, p.num_splits)


def test_stage_times_add_up(lib, monkeypatch):
    fn = varlen(torch.Generator().manual_seed(5))
    monkeypatch.setattr(attention_fastpath, "ENABLED", False)   # the stages of the slow path (a hit skips them)
    with HS.kernel_prep_on_cpu(lib):
        st = H.per_stage(fn, reps=30, warmup=3)
    for s in ("plan", "core prep", "alloc", "params", "ctypes fwd", "args"):
        assert st[s] > 0, (s, st)
    parts = sum(v for k, v in st.items() if k not in ("total", "total_plain"))
    assert parts == pytest.approx(st["total"], rel=0.35)   # medians of parts vs the median whole
