"""kernels/qv_fwd (FA3's qv term) through kernelseek.attention, against reference_fa3 in float64:
every layout (dense, varlen, paged, dense cache with cache_batch_idx and leftpad), the masks, softcap,
GQA, both Dv, both 16-bit types; the split (decode) kernel, the three long-sequence kernels (warp-specialized,
in its TMA / cp.async producer and overlap / serial forms, v18's wgmma form and the mma.sync 64-row form) and a
varlen batch that takes two; the warp-specialized epilogue into aligned and unaligned output rows; the same head
dims without qv; the path recorded
is "qv" (never the naive kernel); a call the kernel refuses keeps the concatenated route; a captured call
replays with new inputs."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import attention as A  # noqa: E402
from kernelseek import attention_core as core  # noqa: E402
from kernelseek import qv_attention  # noqa: E402
from kernelseek.reference_fa3 import attention_ref, kvcache_ref  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOL = {"bf16": (2e-2, 1e-2), "fp16": (5e-3, 1e-2)}   # o max abs, lse max abs (fa3api_grid.TOL)


def _r(*shape, dt, seed=[0]):
    seed[0] += 1
    g = torch.Generator(device="cuda").manual_seed(1000 + seed[0])
    return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32).to(dt)


def _close(o, lse, ro, rl, dtype):
    to, tl = TOL[dtype]
    assert torch.isfinite(o.float()).all()
    err = (o.double() - ro).abs().max().item() if o.numel() else 0.0
    assert err <= to, f"o max err {err}"
    assert torch.equal(torch.isinf(lse), torch.isinf(rl)), "lse -inf pattern"
    fin = torch.isfinite(rl)
    if fin.any():
        lerr = (lse.double()[fin] - rl[fin]).abs().max().item()
        assert lerr <= tl, f"lse max err {lerr}"


DENSE = [  # (B, Sq, Sk, Hq, Hkv, Dv, kwargs)
    (2, 1, 2049, 16, 1, 512, {}),                                               # decode: split keys
    (2, 300, 517, 6, 2, 256, dict(causal=True)),                                # prefill: kRG = 4 tiles
    (1, 77, 1000, 4, 1, 512, dict(window_size=(100, 0), softcap=30.0, attention_chunk=256)),
    (3, 4, 333, 16, 1, 512, dict(causal=True)),                                 # 64 rows: the split kernel
    (1, 90, 70, 2, 1, 256, dict(causal=True)),                                  # rows 0-19 see no key (lse -inf)
    (2, 129, 129, 8, 8, 512, dict(causal=True, window_size=(17, 3))),
    (1, 256, 4100, 16, 1, 512, dict(causal=True)),                              # 64 row tiles x 65 key blocks: the ring wraps
    (1, 150, 300, 8, 1, 512, dict(softmax_scale=-0.07)),                        # a negative scale: no max on raw scores
    (2, 600, 700, 16, 1, 512, dict(causal=True)),                               # 300 tiles: more than one wave
    (2, 1000, 600, 8, 1, 256, dict(causal=True)),                               # 250 tiles, the first 400 rows see no key
]


@pytest.mark.parametrize("big", [2, 3, 4, 1, 0], ids=["ws", "ws-cpasync", "ws-overlap", "wgmma", "mma"])
@pytest.mark.parametrize("has_qv", [True, False], ids=["qv", "plain"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("case", DENSE, ids=lambda c: f"b{c[0]}q{c[1]}k{c[2]}h{c[3]}-{c[4]}dv{c[5]}")
def test_dense(case, dtype, has_qv, big):
    b, sq, sk, hq, hkv, dv, kw = case
    if big < 2 and sq * hq // hkv <= 64:
        pytest.skip("decode shape: the long-sequence kernel is not used")
    dt = DT[dtype]
    q, k, v, qv = _r(b, sq, hq, 64, dt=dt), _r(b, sk, hkv, 64, dt=dt), _r(b, sk, hkv, dv, dt=dt), _r(b, sq, hq, dv, dt=dt)
    qv = qv if has_qv else None
    old = qv_attention.set_big_kernel(big)
    try:
        o, lse = A.flash_attn_func(q, k, v, qv=qv, return_attn_probs=True, num_splits=0, **kw)
    finally:
        qv_attention.set_big_kernel(old)
    assert core.RECORD["paths"] == ["qv"], core.RECORD
    ro, rl = attention_ref(q, k, v, qv=qv, **kw)
    _close(o, lse, ro, rl, dtype)
    if sq * hq // hkv <= 64 and sk > 128:
        assert qv_attention.last_splits() > 1          # the decode shape took the split kernel + combine


def test_num_splits_one_is_honoured():
    dt = torch.bfloat16
    q, k, v, qv = _r(2, 1, 16, 64, dt=dt), _r(2, 999, 1, 64, dt=dt), _r(2, 999, 1, 512, dt=dt), _r(2, 1, 16, 512, dt=dt)
    o, lse = A.flash_attn_func(q, k, v, qv=qv, return_attn_probs=True, num_splits=1)
    assert qv_attention.last_splits() == 1
    _close(o, lse, *attention_ref(q, k, v, qv=qv), "bf16")


MANY_Q = [1] * 900
MANY_K = [1 + (7 * i) % 300 for i in range(900)]
for _i, (_q, _k) in {5: (40, 200), 383: (9, 500), 384: (130, 130), 385: (5, 64), 899: (77, 1000)}.items():
    MANY_Q[_i], MANY_K[_i] = _q, _k


@pytest.mark.parametrize("dv,lq,lk", [(256, [1, 500, 3, 1, 70], [2000, 700, 40, 0, 300]),
                                      (512, [1, 500, 3, 1, 70], [2000, 700, 40, 0, 300]),
                                      (512, MANY_Q, MANY_K)], ids=["dv256", "dv512", "900seqs"])
def test_varlen_mix_of_decodes_and_prefills(dv, lq, lk):
    """A varlen batch with 1-row and longer sequences: the split kernel takes the short ones, the 64-row-tile
    kernel the long ones (its CTAs walk only the long sequences' tiles: 900 sequences take three rounds of
    the 384-thread scan, long ones on both sides of 384); a sequence with no key."""
    dt = torch.bfloat16
    cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device="cuda")
    ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device="cuda")
    hq, hkv = 16, 1
    q, qv = _r(sum(lq), hq, 64, dt=dt), _r(sum(lq), hq, dv, dt=dt)
    k, v = _r(sum(lk), hkv, 64, dt=dt), _r(sum(lk), hkv, dv, dt=dt)
    o, lse = A.flash_attn_varlen_func(q, k, v, cq, ck, max(lq), max(lk), qv=qv, causal=True, return_attn_probs=True)
    assert core.RECORD["paths"] == ["qv"]
    ro, rl = attention_ref(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, qv=qv, causal=True)
    _close(o, lse, ro, rl, "bf16")
    if lk[3] == 0:
        assert torch.isinf(lse[:, sum(lq[:3]):sum(lq[:4])]).all()   # the sequence with no key


@pytest.mark.parametrize("page", [16, 64])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_paged_cache_decode_and_mixed(page, dtype):
    dt = DT[dtype]
    seqlens = torch.tensor([2049, 100, 1500, 7], dtype=torch.int32, device="cuda")
    b, hq, hkv, dv, pages_per = 4, 16, 1, 512, (2049 + page - 1) // page + 1
    npages = b * pages_per + 3
    kc, vc = _r(npages, page, hkv, 64, dt=dt), _r(npages, page, hkv, dv, dt=dt)
    table = torch.randperm(npages, device="cuda")[: b * pages_per].view(b, pages_per).to(torch.int32)
    q, qv = _r(b, 1, hq, 64, dt=dt), _r(b, 1, hq, dv, dt=dt)
    o, lse = A.flash_attn_with_kvcache(q, kc, vc, qv=qv, cache_seqlens=seqlens, page_table=table,
                                       return_softmax_lse=True)
    assert core.RECORD["paths"] == ["qv"]
    ro, rl, _, _ = kvcache_ref(q, kc, vc, qv=qv, cache_seqlens=seqlens, page_table=table)
    _close(o, lse, ro, rl, dtype)
    # packed queries over the same cache: one 300-row chunk among decodes, causal
    lq = [300, 1, 1, 3]
    cq = torch.tensor([0, 300, 301, 302, 305], dtype=torch.int32, device="cuda")
    q2, qv2 = _r(sum(lq), hq, 64, dt=dt), _r(sum(lq), hq, dv, dt=dt)
    o2, lse2 = A.flash_attn_with_kvcache(q2, kc, vc, qv=qv2, cache_seqlens=seqlens, page_table=table,
                                         cu_seqlens_q=cq, max_seqlen_q=300, causal=True, return_softmax_lse=True)
    assert core.RECORD["paths"] == ["qv"]
    ro2, rl2, _, _ = kvcache_ref(q2, kc, vc, qv=qv2, cache_seqlens=seqlens, page_table=table, cu_seqlens_q=cq,
                                 causal=True)
    _close(o2, lse2, ro2, rl2, dtype)


@pytest.mark.parametrize("big", [2, 3, 4], ids=["tma", "cpasync", "tma-overlap"])
@pytest.mark.parametrize("page", [0, 16, 64], ids=["dense", "page16", "page64"])
@pytest.mark.parametrize("window", [None, (77, 0)], ids=["causal", "window77"])
def test_long_chunk_over_a_nan_tailed_cache(window, page, big):
    """A 200-query chunk over caches whose slots past each sequence's length hold NaN: the warp-specialized
    kernel's full key blocks come by TMA (a page's boxes: gcd(64, page) rows), the partial last block by
    cp.async with zeros past the end; a window's unaligned first key sends a paged call to cp.async. The
    reference reads a NaN-free copy: any garbage row that leaks in shows as NaN or a wrong value."""
    dt = torch.bfloat16
    hq, hkv, dv, cap = 16, 1, 512, 1500
    seqlens = torch.tensor([1333, 1290], dtype=torch.int32, device="cuda")
    b = 2
    if page:
        pages_per = (cap + page - 1) // page
        npages = b * pages_per + 5
        kc, vc = _r(npages, page, hkv, 64, dt=dt), _r(npages, page, hkv, dv, dt=dt)
        table = torch.randperm(npages, device="cuda")[: b * pages_per].view(b, pages_per).to(torch.int32)
        kw = dict(page_table=table)
    else:
        kc, vc = _r(b, cap, hkv, 64, dt=dt), _r(b, cap, hkv, dv, dt=dt)
        table, kw = None, {}
    clean_k, clean_v = kc.clone(), vc.clone()
    for i, n in enumerate(seqlens.tolist()):          # NaN in every slot past the sequence's length
        for j in range(n, cap):
            if page:
                pg, slot = int(table[i, j // page]), j % page
                kc[pg, slot], vc[pg, slot] = float("nan"), float("nan")
            else:
                kc[i, j:], vc[i, j:] = float("nan"), float("nan")
                break
    if page:   # and in the pool's pages no sequence owns
        free = sorted(set(range(kc.shape[0])) - set(table.flatten().tolist()))
        kc[free], vc[free] = float("nan"), float("nan")
    q, qv = _r(b, 200, hq, 64, dt=dt), _r(b, 200, hq, dv, dt=dt)
    extra = dict(window_size=window) if window else {}
    old = qv_attention.set_big_kernel(big)
    try:
        o, lse = A.flash_attn_with_kvcache(q, kc, vc, qv=qv, cache_seqlens=seqlens, causal=True,
                                           return_softmax_lse=True, **kw, **extra)
    finally:
        qv_attention.set_big_kernel(old)
    assert core.RECORD["paths"] == ["qv"], core.RECORD
    ro, rl, _, _ = kvcache_ref(q, clean_k, clean_v, qv=qv, cache_seqlens=seqlens, causal=True, **kw, **extra)
    assert not torch.isnan(o).any()
    _close(o, lse, ro, rl, "bf16")


def test_dense_cache_with_batch_idx_leftpad_and_append():
    dt = torch.bfloat16
    b, cap, hq, hkv, dv = 3, 600, 8, 2, 512
    kc, vc = _r(5, cap, hkv, 64, dt=dt), _r(5, cap, hkv, dv, dt=dt)
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")
    seqlens = torch.tensor([590, 33, 300], dtype=torch.int32, device="cuda")
    leftpad = torch.tensor([5, 0, 17], dtype=torch.int32, device="cuda")
    q, qv = _r(b, 2, hq, 64, dt=dt), _r(b, 2, hq, dv, dt=dt)
    kn, vn = _r(b, 2, hkv, 64, dt=dt), _r(b, 2, hkv, dv, dt=dt)
    ref_kc, ref_vc = kc.clone(), vc.clone()
    o, lse = A.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, qv=qv, cache_seqlens=seqlens, cache_batch_idx=idx,
                                       cache_leftpad=leftpad, causal=True, return_softmax_lse=True)
    assert core.RECORD["paths"] == ["qv"], core.RECORD
    ro, rl, kc2, vc2 = kvcache_ref(q, ref_kc, ref_vc, kn, vn, qv=qv, cache_seqlens=seqlens, cache_batch_idx=idx,
                                   leftpad_k=leftpad, causal=True)
    _close(o, lse, ro, rl, "bf16")
    assert torch.equal(kc, kc2) and torch.equal(vc, vc2)


@pytest.mark.parametrize("dv", [256, 512])
@pytest.mark.parametrize("layout", ["aligned", "padded-rows", "offset"])
def test_long_rows_into_any_output_layout(dv, layout, monkeypatch):
    """The long-sequence kernel's epilogue writes 16-byte aligned output rows through shared memory (whole row
    segments per warp) and others (rows of a padded buffer, stride not a multiple of 8; a base 4 bytes off)
    by 4-byte stores: both correct, the padding around the output left as it was. The API allocates its
    own aligned o (out= is copied into), so the layouts come in through attention_core._alloc."""
    from kernelseek import attention_fastpath as F
    dt = torch.bfloat16
    b, sq, sk, hq, hkv = 2, 200, 333, 8, 1
    q, k, v, qv = _r(b, sq, hq, 64, dt=dt), _r(b, sk, hkv, 64, dt=dt), _r(b, sk, hkv, dv, dt=dt), _r(b, sq, hq, dv, dt=dt)
    pad = {"aligned": 0, "padded-rows": 6, "offset": 2}[layout]
    buf = torch.full((b, sq, hq, dv + pad), 7.0, device="cuda", dtype=dt)
    view = buf[..., 2:dv + 2] if layout == "offset" else buf[..., :dv]
    alloc = core._alloc
    monkeypatch.setattr(core, "_alloc", lambda c: (view, alloc(c)[1]))
    monkeypatch.setattr(F, "ENABLED", False)
    o, lse = A.flash_attn_func(q, k, v, qv=qv, causal=True, return_attn_probs=True)
    assert core.RECORD["paths"] == ["qv"], core.RECORD
    assert o.data_ptr() == view.data_ptr()
    _close(o, lse, *attention_ref(q, k, v, qv=qv, causal=True), "bf16")
    if pad:
        rest = buf[..., :2] if layout == "offset" else buf[..., dv:]
        assert bool((rest == 7.0).all()), "a store outside the output"


def test_refused_call_keeps_the_concatenated_route():
    """qv with sinks: the qv kernel refuses it, the concatenated (naive wide) route answers, correctly."""
    dt = torch.bfloat16
    q, k, v, qv = _r(1, 3, 4, 64, dt=dt), _r(1, 50, 4, 64, dt=dt), _r(1, 50, 4, 256, dt=dt), _r(1, 3, 4, 256, dt=dt)
    sinks = torch.randn(4, device="cuda")
    o, lse = A.flash_attn_func(q, k, v, qv=qv, s_aux=sinks, return_attn_probs=True)
    assert "qv-concat" in core.RECORD["steps"] and "qv" not in core.RECORD["paths"]
    _close(o, lse, *attention_ref(q, k, v, qv=qv, s_aux=sinks), "bf16")


def test_decode_captures_in_a_cuda_graph():
    dt = torch.bfloat16
    q, k, v, qv = _r(4, 1, 16, 64, dt=dt), _r(4, 1500, 1, 64, dt=dt), _r(4, 1500, 1, 512, dt=dt), _r(4, 1, 16, 512, dt=dt)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        A.flash_attn_func(q, k, v, qv=qv, num_splits=0)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        out = A.flash_attn_func(q, k, v, qv=qv, num_splits=0)
    qv.copy_(_r(4, 1, 16, 512, dt=dt))
    g.replay()
    torch.cuda.synchronize()
    ro, _ = attention_ref(q, k, v, qv=qv)
    assert (out.double() - ro).abs().max().item() <= TOL["bf16"][0]
