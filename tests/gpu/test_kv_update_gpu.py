"""kernels/kv_update.cu against attention_cache's torch ops, bit for bit, on every layout it takes."""
import itertools

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import attention as A  # noqa: E402
from kernelseek import attention_cache as cache  # noqa: E402
from kernelseek import attention_core as C  # noqa: E402
from kernelseek import kv_update  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


def _case(dtype, paged, packed, rotary, interleaved, per_row, batch_idx, cs_dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt, dev = DT[dtype], "cuda"
    B, Hq, Hkv, D, Dv, cap = 3, 8, 2, 128, 128, 300
    rnd = lambda *s: torch.randn(*s, generator=g, device=dev).to(dt)   # noqa: E731
    seqlens = torch.tensor([5, 0, 211], dtype=torch.int32, device=dev)
    new = [3, 1, 7]
    if packed:
        cu = torch.tensor([0, 3, 4, 11], dtype=torch.int32, device=dev)
        k, v, q = rnd(11, Hkv, D), rnd(11, Hkv, Dv), rnd(11, Hq, D)
    else:
        cu, new = None, [7, 7, 7]
        k, v, q = rnd(B, 7, Hkv, D), rnd(B, 7, Hkv, Dv), rnd(B, 7, Hq, D)
    rows = 5 if batch_idx else B
    if paged:
        ps, per = 16, -(-cap // 16)
        perm = torch.randperm(rows * per, generator=g, device=dev).to(torch.int32)
        pt = perm.view(rows, per)
        kc, vc = rnd(rows * per, ps, Hkv, D), rnd(rows * per, ps, Hkv, Dv)
    else:
        pt = None
        kc = rnd(rows, cap, Hkv, 2 * D)[..., :D]               # a strided view: rows of 2 D, half used
        vc = rnd(rows, cap, Hkv, Dv)
    bidx = torch.tensor([4, 0, 2], dtype=torch.int32, device=dev) if batch_idx else None
    cos = sin = ro = None
    if rotary:
        ang = torch.rand(cap + 16, rotary // 2, generator=g, device=dev) * 6.283
        cos, sin = ang.cos().to(cs_dtype), ang.sin().to(cs_dtype)
        ro = torch.tensor([9, 0, 200], dtype=torch.int32, device=dev)
    return dict(q=q, kc=kc, vc=vc, k=k, v=v, seqlens=seqlens, pt=pt, bidx=bidx, cu=cu, cos=cos, sin=sin, ro=ro,
                interleaved=interleaved, per_row=per_row, new=new)


def _torch_path(c):
    kc, vc = c["kc"].clone(), c["vc"].clone()
    q = c["q"]
    if c["cos"] is not None:
        q = cache.rotate_q(q, c["cos"], c["sin"], c["ro"], c["cu"], c["per_row"], c["interleaved"])
    new = cache.append_kv(kc, vc, c["k"], c["v"], cache_seqlens=c["seqlens"], page_table=c["pt"], batch_idx=c["bidx"],
                          cu_new=c["cu"], cos=c["cos"], sin=c["sin"], ro=c["ro"], interleaved=c["interleaved"])
    return q, kc, vc, (c["seqlens"].long() + new).to(torch.int32)


GRID = [dict(dtype=d, paged=p, packed=pk, rotary=r, interleaved=i, per_row=pr, batch_idx=b, cs_dtype=cs)
        for d, p, pk, (r, i), pr, b, cs in itertools.product(
            ("bf16", "fp16", "fp8"), (False, True), (False, True), ((0, True), (128, True), (64, False), (128, False)),
            (True, False), (False, True), (torch.float32, torch.bfloat16))
        if not (r == 0 and (not pr or cs != torch.float32))]


@pytest.mark.parametrize("kw", GRID, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()).replace("torch.", ""))
def test_kernel_matches_torch_ops_bit_for_bit(kw):
    c = _case(**kw, seed=7)
    ref_q, ref_kc, ref_vc, ref_used = _torch_path(c)
    kc, vc = c["kc"].clone(), c["vc"].clone()
    res = kv_update.update(c["q"], kc, vc, c["k"], c["v"], seqlens=c["seqlens"], page_table=c["pt"],
                           batch_idx=c["bidx"], cu_q=c["cu"], cu_new=c["cu"], cos=c["cos"], sin=c["sin"], ro=c["ro"],
                           interleaved=c["interleaved"], per_row=c["per_row"])
    assert res is not None, "the kernel refused a layout it should take"
    q, used = res
    torch.cuda.synchronize()
    u8 = lambda t: t.contiguous().view(torch.uint8)   # noqa: E731  (bit comparison, NaN-safe, fp8 too)
    assert torch.equal(used, ref_used)
    assert torch.equal(u8(kc), u8(ref_kc)), "k cache differs"
    assert torch.equal(u8(vc), u8(ref_vc)), "v cache differs"
    assert torch.equal(u8(q), u8(ref_q)), "rotated q differs"
    assert (q is c["q"]) == (c["cos"] is None)


def test_unaligned_rows_take_the_torch_path_and_agree():
    c = _case("bf16", False, False, 64, False, True, False, torch.float32, seed=3)
    base = torch.randn(3 * 300 * 2 * 128 + 4, device="cuda").to(torch.bfloat16)
    kc = base[4:].view(3, 300, 2, 128)                    # 8-byte aligned, not 16: the kernel cannot take it
    assert not kv_update.supported(c["q"], kc, c["vc"], c["k"], c["v"], cu_q=None, cu_new=None, cos=c["cos"],
                                   page_table=None)
    c["kc"] = kc
    ref = _torch_path(dict(c))
    o = A.flash_attn_with_kvcache(c["q"], kc, c["vc"], c["k"], c["v"], rotary_cos=c["cos"], rotary_sin=c["sin"],
                                  cache_seqlens=c["seqlens"], rotary_seqlens=c["ro"], rotary_interleaved=False,
                                  causal=True)
    assert "append-kv" in C.RECORD["steps"] and "kv-update" not in C.RECORD["steps"]
    assert torch.equal(kc, ref[1]) and torch.isfinite(o.float()).all()


def test_api_uses_one_launch_and_matches_the_torch_composition():
    """flash_attn_with_kvcache with new k/v and rotary: the kv-update step, and the same output and caches
    as the same call with the kernel switched off (the torch ops)."""
    c = _case("bf16", True, True, 128, False, True, False, torch.float32, seed=5)
    cu_q = c["cu"]
    args = dict(rotary_cos=c["cos"], rotary_sin=c["sin"], cache_seqlens=c["seqlens"], cache_batch_idx=c["bidx"],
                page_table=c["pt"], cu_seqlens_q=cu_q, cu_seqlens_k_new=c["cu"], max_seqlen_q=7, rotary_seqlens=c["ro"],
                rotary_interleaved=False, causal=True, return_softmax_lse=True)
    kc1, vc1 = c["kc"].clone(), c["vc"].clone()
    o1, lse1 = A.flash_attn_with_kvcache(c["q"], kc1, vc1, c["k"], c["v"], **args)
    assert C.RECORD["steps"] == ["kv-update"], C.RECORD
    kc2, vc2 = c["kc"].clone(), c["vc"].clone()
    saved = kv_update.update
    kv_update.update = lambda *a, **k: None
    try:
        o2, lse2 = A.flash_attn_with_kvcache(c["q"], kc2, vc2, c["k"], c["v"], **args)
    finally:
        kv_update.update = saved
    assert "append-kv" in C.RECORD["steps"]
    assert torch.equal(kc1, kc2) and torch.equal(vc1, vc2)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
