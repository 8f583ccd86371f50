"""kernelseek.attention's composition (attention_plan, attention_cache) against reference_fa3, on CPU.

On CPU tensors each kseek.h call the plan makes is answered by the float64 reference, so these
tests check that the transforms (chunk segments, seqused_q compaction, packed/gathered keys, batch
index as pages, appended and rotated keys, head-dim padding and V splits) give FA3's answer, and
that the plan takes the steps we expect. The kernel paths themselves are checked on the GPU
(tools/gpu_fa3api.sh).
"""
import itertools

import pytest
import torch

from kernelseek import attention as A
from kernelseek import attention_core as C
from kernelseek import reference_fa3 as R


def rnd(g, *shape, dtype=torch.bfloat16):
    return torch.randn(*shape, generator=g).to(dtype)


def close(o, lse, ro, rl, tol=2e-2):
    assert torch.equal(torch.isinf(lse), torch.isinf(rl))
    fin = torch.isfinite(rl)
    assert (lse.double()[fin] - rl[fin]).abs().max().item() < 1e-3 if fin.any() else True
    assert (o.double() - ro).abs().max().item() < tol


@pytest.mark.parametrize("sq, sk", [(7, 11), (11, 7), (1, 9), (6, 6)])
def test_dense_chunk_window_causal(sq, sk):
    g = torch.Generator().manual_seed(sq * 100 + sk)
    q, k, v = rnd(g, 2, sq, 4, 64), rnd(g, 2, sk, 2, 64), rnd(g, 2, sk, 2, 64)
    for chunk, causal, win in itertools.product([0, 1, 3, 20], [False, True], [(-1, -1), (2, 1)]):
        o, lse = A.flash_attn_func(q, k, v, causal=causal, window_size=win, attention_chunk=chunk,
                                   return_attn_probs=True)
        close(o, lse, *R.attention_ref(q, k, v, causal=causal, window_size=win, attention_chunk=chunk))
        # ABI 3: the chunk is the kernel's (one call, no segments), like the window
        assert C.RECORD["steps"] == [] and len(C.RECORD["paths"]) == 1, C.RECORD


def test_varlen_seqused_q_k_and_chunk():
    g = torch.Generator().manual_seed(1)
    cu_q, cu_k = torch.tensor([0, 5, 5, 12], dtype=torch.int32), torch.tensor([0, 9, 13, 20], dtype=torch.int32)
    q, k, v = rnd(g, 12, 4, 64), rnd(g, 20, 2, 64), rnd(g, 20, 2, 64)
    used_q, used_k = torch.tensor([3, 0, 7], dtype=torch.int32), torch.tensor([6, 4, 7], dtype=torch.int32)
    for uq, uk, chunk, causal in itertools.product([None, used_q], [None, used_k], [0, 2, 4], [False, True]):
        o, lse = A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 9, seqused_q=uq, seqused_k=uk, causal=causal,
                                          attention_chunk=chunk, return_attn_probs=True)
        close(o, lse, *R.attention_ref(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqused_q=uq, seqused_k=uk,
                                       causal=causal, attention_chunk=chunk))
        assert ("seqused-q-segments" in C.RECORD["steps"]) == (uq is not None)
    # rows past seqused_q are zeros with lse -inf
    o, lse = A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 9, seqused_q=used_q, return_attn_probs=True)
    assert (o[3:5] == 0).all() and torch.isinf(lse[:, 3:5]).all()


def _against_ref(q, kc, vc, kw, **common):
    """flash_attn_with_kvcache(q, kc, vc, **common, **kw) against reference.kvcache_ref on the same call
    (the reference names cache_leftpad leftpad_k and takes only cu_seqlens_q of kw)."""
    o, lse = A.flash_attn_with_kvcache(q, kc, vc, return_softmax_lse=True, **common, **kw)
    ref = {("leftpad_k" if k == "cache_leftpad" else k): v for k, v in common.items()}
    ro, rl, _, _ = R.kvcache_ref(q, kc, vc, cu_seqlens_q=kw.get("cu_seqlens_q"), **ref)
    close(o, lse, ro, rl)


def _cache(g, paged, bc, cap, hkv, d, dv, ps=4):
    if not paged:
        return rnd(g, bc, cap, hkv, d), rnd(g, bc, cap, hkv, dv), None
    n = bc * cap // ps
    table = torch.randperm(n, generator=g).view(bc, cap // ps).to(torch.int32)
    return rnd(g, n, ps, hkv, d), rnd(g, n, ps, hkv, dv), table


CASES = list(itertools.product([False, True], [False, True], [False, True], [False, True], [0, 3]))


@pytest.mark.parametrize("paged, batch_idx, leftpad, varlen_q, chunk", CASES)
def test_kvcache_layouts(paged, batch_idx, leftpad, varlen_q, chunk):
    g = torch.Generator().manual_seed(hash((paged, batch_idx, leftpad, varlen_q, chunk)) % 1000)
    b, cap, hq, hkv, d = 3, 16, 4, 2, 64
    bc = 5 if batch_idx else b
    kc, vc, table = _cache(g, paged, bc, cap, hkv, d, d)
    idx = torch.tensor([4, 0, 2], dtype=torch.int32) if batch_idx else None
    seqlens = torch.tensor([16, 9, 3], dtype=torch.int32)
    lp = torch.tensor([2, 0, 1], dtype=torch.int32) if leftpad else None
    if varlen_q:
        cu = torch.tensor([0, 5, 6, 8], dtype=torch.int32)
        q = rnd(g, 8, hq, d)
        kw = dict(cu_seqlens_q=cu, max_seqlen_q=5)
    else:
        q, kw = rnd(g, b, 2, hq, d), {}
    for causal in (False, True):
        _against_ref(q, kc, vc, kw, cache_seqlens=seqlens, cache_batch_idx=idx, cache_leftpad=lp,
                     page_table=table, causal=causal, attention_chunk=chunk)
        steps = C.RECORD["steps"]
        # decode-shaped (varlen or not), chunked or not (ABI 3): one call over the cache where it lies
        assert "packed" not in steps and not any(st.startswith("gather") for st in steps), steps
        assert len(C.RECORD["paths"]) == 1, C.RECORD


@pytest.mark.parametrize("dtype, ps, leftpad, batch_idx", [(torch.bfloat16, 4, True, False), (torch.bfloat16, 1, False, True),
                                                      (torch.bfloat16, 16, False, False), (torch.float8_e4m3fn, 16, False, False),
                                                      (torch.float8_e4m3fn, 4, True, True)])
def test_kvcache_dense_queries_over_pages_are_one_call(dtype, ps, leftpad, batch_idx):
    """Kernel v14 reads any paged cache for a prefill-shaped call with dense queries (16-bit or fp8, any
    page size, left padding: it copies the pages into its workspace itself), and fp8 decode shapes on
    its decode path: the plan makes one call over the cache as it lies, no gather of its own."""
    g = torch.Generator().manual_seed(ps * 10 + leftpad)
    b, cap, hq, hkv, d = 3, 32, 4, 2, 64
    bc = 5 if batch_idx else b
    kc, vc, table = (t.to(dtype) if t is not None and t.is_floating_point() else t
                     for t in _cache(g, True, bc, cap, hkv, d, d, ps=ps))
    idx = torch.tensor([4, 0, 2], dtype=torch.int32) if batch_idx else None
    seqlens = torch.tensor([30, 9, 17], dtype=torch.int32)
    lp = torch.tensor([2, 0, 5], dtype=torch.int32) if leftpad else None
    for sq in (40, 1):                                   # 40 x G 2 = 80 rows: the prefill; 1: the decode path
        q = rnd(g, b, sq, hq, d).to(dtype)
        o, lse = A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, page_table=table, cache_batch_idx=idx,
                                           cache_leftpad=lp, causal=True, return_softmax_lse=True)
        steps = C.RECORD["steps"]
        assert len(C.RECORD["paths"]) == 1 and "packed" not in steps and "gather-pages" not in steps, (sq, steps)
        ro, rl, _, _ = R.kvcache_ref(q, kc, vc, cache_seqlens=seqlens, page_table=table, cache_batch_idx=idx,
                                     leftpad_k=lp, causal=True)
        close(o, lse, ro, rl, tol=2e-2 if dtype == torch.bfloat16 else 6e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_varlen_decode_over_pages(dtype):
    """Packed decode-shaped queries over a paged cache (page 4, left padding): 16-bit ones are one call on
    the kernel's decode path; fp8 ones are still gathered (the fp8 decode with cu_seqlens_q has not run on
    a GPU). Both give the reference's answer."""
    g = torch.Generator().manual_seed(31)
    kc, vc, table = (t.to(dtype) if t.is_floating_point() else t for t in _cache(g, True, 3, 32, 2, 128, 128, ps=4))
    cu = torch.tensor([0, 1, 4, 6], dtype=torch.int32)
    q = rnd(g, 6, 4, 128).to(dtype)
    seqlens, lp = torch.tensor([30, 9, 17], dtype=torch.int32), torch.tensor([1, 0, 3], dtype=torch.int32)
    o, lse = A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, page_table=table, cu_seqlens_q=cu,
                                       cache_leftpad=lp, max_seqlen_q=3, causal=True, return_softmax_lse=True)
    fp8 = dtype != torch.bfloat16
    assert len(C.RECORD["paths"]) == 1 and ("gather-pages" in C.RECORD["steps"]) == fp8, C.RECORD
    ro, rl, _, _ = R.kvcache_ref(q, kc, vc, cache_seqlens=seqlens, page_table=table, cu_seqlens_q=cu,
                                 leftpad_k=lp, causal=True)
    close(o, lse, ro, rl, tol=6e-2 if fp8 else 2e-2)


@pytest.mark.parametrize("paged, ps", [(False, 0), (True, 4), (True, 16)])
def test_kvcache_long_varlen_queries(paged, ps):
    """Varlen queries too long for the decode path over a cache: one in-place call (the kernel splits the
    batch between its decode and prefill paths) over a dense cache or pages of a multiple of 8 rows;
    other page sizes are gathered into packed keys."""
    g = torch.Generator().manual_seed(9)
    kc, vc, table = _cache(g, paged, 3, 48, 2, 64, 64, ps=ps or 4)
    cu = torch.tensor([0, 40, 41, 47], dtype=torch.int32)      # 40 rows x G 2 = 80 > the decode path's 64
    q = rnd(g, 47, 4, 64)
    seqlens = torch.tensor([45, 3, 48], dtype=torch.int32)
    o, lse = A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, page_table=table, cu_seqlens_q=cu,
                                       max_seqlen_q=40, causal=True, return_softmax_lse=True)
    close(o, lse, *R.kvcache_ref(q, kc, vc, cache_seqlens=seqlens, page_table=table, cu_seqlens_q=cu, causal=True)[:2])
    gathered = paged and ps % 8 != 0
    assert ("packed" in C.RECORD["steps"]) == gathered and ("gather-pages" in C.RECORD["steps"]) == gathered


@pytest.mark.parametrize("paged, varlen_q, interleaved, rot", list(itertools.product([False, True], [False, True],
                                                                                     [False, True], [0, 32])))
def test_kvcache_append_with_rotary(paged, varlen_q, interleaved, rot):
    g = torch.Generator().manual_seed(11)
    b, cap, hq, hkv, d = 3, 16, 4, 2, 64
    kc, vc, table = _cache(g, paged, b, cap, hkv, d, d)
    seqlens = torch.tensor([0, 7, 12], dtype=torch.int32)
    if varlen_q:
        cu_q, cu_new = torch.tensor([0, 3, 4, 6], dtype=torch.int32), torch.tensor([0, 2, 3, 7], dtype=torch.int32)
        q, kn, vn = rnd(g, 6, hq, d), rnd(g, 7, hkv, d), rnd(g, 7, hkv, d)
        kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k_new=cu_new, max_seqlen_q=3)
        rkw = dict(cu_seqlens_q=cu_q, cu_seqlens_k_new=cu_new)
    else:
        q, kn, vn = rnd(g, b, 3, hq, d), rnd(g, b, 3, hkv, d), rnd(g, b, 3, hkv, d)
        kw, rkw = {}, {}
    cos = sin = None
    if rot:
        ang = torch.rand(cap, rot // 2, generator=g) * 6.28
        cos, sin = torch.cos(ang).to(torch.bfloat16), torch.sin(ang).to(torch.bfloat16)
    for causal in (False, True):
        k1, v1 = kc.clone(), vc.clone()
        o, lse = A.flash_attn_with_kvcache(q, k1, v1, kn, vn, rotary_cos=cos, rotary_sin=sin, cache_seqlens=seqlens,
                                           page_table=table, causal=causal, rotary_interleaved=interleaved,
                                           return_softmax_lse=True, **kw)
        ro, rl, kc_ref, vc_ref = R.kvcache_ref(q, kc, vc, kn, vn, rotary_cos=cos, rotary_sin=sin,
                                               cache_seqlens=seqlens, page_table=table, causal=causal,
                                               rotary_interleaved=interleaved, **rkw)
        assert torch.equal(v1, vc_ref)
        assert (k1.double() - kc_ref.double()).abs().max().item() <= (1e-2 if rot else 0.0)
        close(o, lse, ro, rl)
        assert ("append-kv" in C.RECORD["steps"]) and (("rotary" in C.RECORD["steps"]) == bool(rot))


@pytest.mark.parametrize("d, dv, has_qv", [(64, 128, False), (64, 256, False), (64, 512, False), (192, 128, False),
                                           (16, 48, True)])
def test_head_dims_and_qv(d, dv, has_qv):
    g = torch.Generator().manual_seed(d + dv)
    q, k, v = rnd(g, 1, 5, 2, d), rnd(g, 1, 9, 1, d), rnd(g, 1, 9, 1, dv)
    qv = rnd(g, 1, 5, 2, dv) if has_qv else None
    o, lse = A.flash_attn_func(q, k, v, qv=qv, causal=True, return_attn_probs=True)
    close(o, lse, *R.attention_ref(q, k, v, qv=qv, causal=True))
    assert ("dv-split" in C.RECORD["steps"]) == (dv > 256)
    assert ("qv-concat" in C.RECORD["steps"]) == has_qv


@pytest.mark.parametrize("dv", [256, 512])
def test_fa3_qv_shapes_concatenate_on_cpu(dv):
    """CPU tensors take the concatenated route (the wide naive kernel's, answered by the reference here);
    CUDA ones kernels/qv_fwd.cu (tests/gpu/test_qv_gpu.py)."""
    g = torch.Generator().manual_seed(dv)
    q, k, v, qv = rnd(g, 2, 3, 4, 64), rnd(g, 2, 9, 1, 64), rnd(g, 2, 9, 1, dv), rnd(g, 2, 3, 4, dv)
    o, lse = A.flash_attn_func(q, k, v, qv=qv, causal=True, attention_chunk=4, return_attn_probs=True)
    close(o, lse, *R.attention_ref(q, k, v, qv=qv, causal=True, attention_chunk=4))
    assert {"qv-concat", "wide-naive"} <= set(C.RECORD["steps"]) and "dv-split" not in C.RECORD["steps"]


def test_head_dims_past_every_kernel_are_refused_not_wrong():
    g = torch.Generator().manual_seed(0)
    q, k, v, qv = rnd(g, 1, 2, 1, 128), rnd(g, 1, 3, 1, 128), rnd(g, 1, 3, 1, 512), rnd(g, 1, 2, 1, 512)
    with pytest.raises(NotImplementedError, match="head dim 640"):
        A.flash_attn_func(q, k, v, qv=qv)
    f8 = torch.float8_e4m3fn
    with pytest.raises(NotImplementedError, match="head dim 320"):
        A.flash_attn_func(q[..., :64].to(f8), k[..., :64].to(f8), v[..., :256].to(f8), qv=qv[..., :256].to(f8))


def test_fp8_descales_through_chunk_and_out():
    g = torch.Generator().manual_seed(2)
    f8 = torch.float8_e4m3fn
    q, k, v = rnd(g, 2, 6, 4, 64, dtype=f8), rnd(g, 2, 10, 2, 64, dtype=f8), rnd(g, 2, 10, 2, 64, dtype=f8)
    ds = [torch.rand(2, 2, generator=g) + 0.5 for _ in range(3)]
    out = torch.empty(2, 6, 4, 64, dtype=torch.bfloat16)
    o, lse = A.flash_attn_func(q, k, v, q_descale=ds[0], k_descale=ds[1], v_descale=ds[2], causal=True,
                               attention_chunk=4, return_attn_probs=True, out=out)
    assert o is out and o.dtype == torch.bfloat16
    close(o, lse, *R.attention_ref(q, k, v, q_descale=ds[0], k_descale=ds[1], v_descale=ds[2], causal=True,
                                   attention_chunk=4), tol=5e-2)


def test_combine_matches_reference_and_writes_out():
    g = torch.Generator().manual_seed(4)
    o_p, l_p = torch.randn(3, 2, 5, 4, 32, generator=g), torch.randn(3, 2, 5, 4, generator=g)
    l_p[2, 1] = float("-inf")
    out = torch.empty(2, 5, 4, 32, dtype=torch.bfloat16)
    o, lse = A.flash_attn_combine(o_p, l_p, out=out, out_dtype=torch.bfloat16)
    ro, rl = R.combine_ref(o_p, l_p)
    assert o is out and (o.double() - ro).abs().max().item() < 2e-2 and torch.allclose(lse.double(), rl, atol=1e-5)


def test_scheduler_metadata_is_accepted_and_qkvpacked_matches():
    g = torch.Generator().manual_seed(6)
    md = A.get_scheduler_metadata(1, 1, 8, 2, 1, 64, torch.tensor([8], dtype=torch.int32))
    q, kc, vc = rnd(g, 1, 1, 2, 64), rnd(g, 1, 8, 1, 64), rnd(g, 1, 8, 1, 64)
    o = A.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=8, scheduler_metadata=md, num_splits=3, pack_gqa=True)
    assert torch.allclose(o.double(), R.attention_ref(q, kc, vc)[0], atol=2e-2)
    qkv = rnd(g, 1, 6, 3, 2, 64)
    o = A.flash_attn_qkvpacked_func(qkv, causal=True)
    want = R.attention_ref(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=True)[0]
    assert (o.double() - want).abs().max().item() < 2e-2


F8 = torch.float8_e4m3fn


@pytest.mark.parametrize("case", ["plain", "causal-softcap", "qv-dv512", "fp8", "chunk", "seqused_q"])
def test_varlen_batch_whose_keys_are_all_empty_launches_nothing(case):
    """FA3's test_flash_attn_varlen_output at seqlen 4096 (batch 2, both key lengths 0): total_k = 0,
    so k/v have no storage (data_ptr 0) and the kernel answered KSEEK_ERR_INVALID. FA3 answers
    O = 0, lse = -inf; so must we, without a launch (path "empty")."""
    g = torch.Generator().manual_seed(25)
    dt = F8 if case == "fp8" else torch.bfloat16
    dv = 512 if case == "qv-dv512" else 64
    cu_q, cu_k = torch.tensor([0, 7, 12], dtype=torch.int32), torch.zeros(3, dtype=torch.int32)
    q, k, v = rnd(g, 12, 6, 64, dtype=dt), rnd(g, 0, 2, 64, dtype=dt), rnd(g, 0, 2, dv, dtype=dt)
    assert k.data_ptr() == 0 and v.data_ptr() == 0   # what the kernel would have been handed
    kw = dict(causal=case == "causal-softcap", softcap=15.0 if case == "causal-softcap" else 0.0,
              attention_chunk=3 if case == "chunk" else 0,
              qv=rnd(g, 12, 6, dv) if case == "qv-dv512" else None,
              seqused_q=torch.tensor([5, 0], dtype=torch.int32) if case == "seqused_q" else None)
    if case == "fp8":
        kw.update(q_descale=torch.ones(2, 2), k_descale=torch.ones(2, 2), v_descale=torch.ones(2, 2))
    o, lse = A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 0, return_attn_probs=True, **kw)
    assert set(C.RECORD["paths"]) == {"empty"}
    assert o.shape == (12, 6, dv) and lse.shape == (6, 12)
    close(o, lse, *R.attention_ref(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw))
    assert (o == 0).all() and torch.isinf(lse).all()


def test_calls_with_no_query_rows_or_no_keys_launch_nothing():
    g = torch.Generator().manual_seed(26)
    q, k, v = rnd(g, 2, 0, 4, 64), rnd(g, 2, 9, 2, 64), rnd(g, 2, 9, 2, 64)
    o, lse = A.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert o.shape == (2, 0, 4, 64) and lse.shape == (2, 4, 0) and C.RECORD["paths"] == ["empty"]
    q = rnd(g, 2, 3, 4, 64)
    o, lse = A.flash_attn_func(q, k[:, :0], v[:, :0], return_attn_probs=True)
    assert C.RECORD["paths"] == ["empty"] and (o == 0).all() and torch.isinf(lse).all()
    # one empty sequence among others is an ordinary call (the kernel gives that row O = 0, lse = -inf)
    cu_k = torch.tensor([0, 0, 9], dtype=torch.int32)
    o, lse = A.flash_attn_varlen_func(q.flatten(0, 1), k[0], v[0], torch.tensor([0, 3, 6], dtype=torch.int32),
                                      cu_k, 3, 9, return_attn_probs=True)
    assert C.RECORD["paths"] == ["reference"] and (o[:3] == 0).all() and torch.isinf(lse[:, :3]).all()


@pytest.mark.parametrize("varlen_q, batch_idx, chunk", list(itertools.product([False, True], [False, True], [8, 16])))
def test_chunk_over_pages_reads_the_cache_in_place(varlen_q, batch_idx, chunk):
    """attention_chunk over a paged cache (8-row pages): one kernel call over the cache where it lies
    (ABI 3 takes the chunk), no key gathered; the result is the reference's."""
    g = torch.Generator().manual_seed(31 + chunk + 2 * varlen_q + 4 * batch_idx)
    b, cap, hq, hkv, d = 3, 48, 4, 2, 64
    bc = 4 if batch_idx else b
    kc, vc, table = _cache(g, True, bc, cap, hkv, d, d, ps=8)
    idx = torch.tensor([3, 0, 2], dtype=torch.int32) if batch_idx else None
    seqlens = torch.tensor([48, 21, 7], dtype=torch.int32)
    if varlen_q:
        cu = torch.tensor([0, 20, 21, 26], dtype=torch.int32)   # 20 rows x G 2 > the decode path's 64? no: 40
        q, kw = rnd(g, 26, hq, d), dict(cu_seqlens_q=cu, max_seqlen_q=20)
    else:
        q, kw = rnd(g, b, 5, hq, d), {}
    for causal, win in ((False, (-1, -1)), (True, (-1, -1)), (True, (5, 0))):
        _against_ref(q, kc, vc, kw, cache_seqlens=seqlens, cache_batch_idx=idx, page_table=table,
                     causal=causal, window_size=win, attention_chunk=chunk)
        steps = C.RECORD["steps"]
        assert "gather-pages" not in steps and len(C.RECORD["paths"]) == 1, C.RECORD
