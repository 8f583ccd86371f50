"""inputs.py: seeded, reproducible inputs in the kernel's layouts, shuffled pages, fp8 descales."""
import math

import pytest
import torch

from kernelseek.inputs import alloc_outputs, gather_kv, make_inputs, pages_per_seq
from kernelseek.scenarios import Scenario

DENSE = Scenario(name="dense", batch=2, seqlen_q=5, seqlen_k=9, heads_q=4, heads_kv=2, head_dim=16)
VARLEN = Scenario(name="varlen", seqlens_q=(3, 0, 6), seqlens_k=(4, 7, 2), heads_q=4, heads_kv=1,
                  head_dim=16, head_dim_v=8, sinks=True)
PAGED = Scenario(name="paged", batch=3, seqlen_q=1, seqlen_k=22, page_size=4, heads_q=4, heads_kv=2,
                 head_dim=8, cache_seqlens=(22, 9, 1), leftpad=(3, 0, 1))
FP8 = Scenario(name="fp8", dtype="fp8", batch=2, seqlen_q=6, seqlen_k=7, heads_q=4, heads_kv=2, head_dim=16)
FP8_PAGED = Scenario(name="fp8p", dtype="fp8", batch=2, seqlen_q=2, seqlen_k=16, page_size=4,
                     heads_q=2, heads_kv=2, head_dim=8)
FP8_VARLEN = Scenario(name="fp8v", dtype="fp8", seqlens_q=(2, 5), seqlens_k=(3, 4), heads_q=4,
                      heads_kv=2, head_dim=8)
ALL = [DENSE, VARLEN, PAGED, FP8, FP8_PAGED, FP8_VARLEN]


@pytest.mark.parametrize("s", ALL, ids=lambda s: s.name)
def test_same_seed_identical_different_seed_different(s):
    a, b, c = make_inputs(s, 7), make_inputs(s, 7), make_inputs(s, 8)
    ta, tb, tc = a.tensors(), b.tensors(), c.tensors()
    assert ta.keys() == tb.keys() == tc.keys()
    for name in ta:
        assert ta[name].dtype == tb[name].dtype
        assert torch.equal(ta[name].view(torch.uint8) if ta[name].dtype == torch.float8_e4m3fn else ta[name],
                           tb[name].view(torch.uint8) if tb[name].dtype == torch.float8_e4m3fn else tb[name]), name
    for name in ("q", "k", "v"):
        assert not torch.equal(ta[name].float(), tc[name].float()), name
    if s.paged:
        assert not torch.equal(ta["page_table"], tc["page_table"])


@pytest.mark.parametrize("s", ALL, ids=lambda s: s.name)
def test_values_are_random_normal_not_zero(s):
    inp = make_inputs(s, 0)
    for name in ("q", "k", "v"):
        x = getattr(inp, name).float()
        assert torch.isfinite(x).all()
        assert (x != 0).float().mean() > 0.9, name
    if s.dtype != "fp8":
        x = torch.cat([inp.q.float().flatten(), inp.k.float().flatten()])
        assert abs(x.mean().item()) < 0.3 and 0.7 < x.std().item() < 1.3


def test_dense_shapes_and_dtypes():
    inp = make_inputs(DENSE, 1)
    assert inp.q.shape == (2, 5, 4, 16) and inp.k.shape == (2, 9, 2, 16) and inp.v.shape == (2, 9, 2, 16)
    assert inp.q.dtype == torch.bfloat16 and inp.out_dtype == torch.bfloat16
    assert set(inp.tensors()) == {"q", "k", "v"}
    fp16 = make_inputs(Scenario(name="h", batch=1, seqlen_q=2, seqlen_k=2, heads_q=1, heads_kv=1,
                                head_dim=8, dtype="fp16"), 1)
    assert fp16.q.dtype == torch.float16 and fp16.out_dtype == torch.float16


def test_varlen_layout_and_side_tensors():
    inp = make_inputs(VARLEN, 2)
    assert inp.q.shape == (9, 4, 16) and inp.k.shape == (13, 1, 16) and inp.v.shape == (13, 1, 8)
    assert inp.cu_seqlens_q.tolist() == [0, 3, 3, 9] and inp.cu_seqlens_q.dtype == torch.int32
    assert inp.cu_seqlens_k.tolist() == [0, 4, 11, 13] and inp.cu_seqlens_k.dtype == torch.int32
    assert inp.sinks.shape == (4,) and inp.sinks.dtype == torch.float32
    assert inp.page_table is None and inp.seqused_k is None


def test_paged_table_is_shuffled_permutation():
    inp = make_inputs(PAGED, 3)
    pps = pages_per_seq(PAGED)
    assert pps == math.ceil(22 / 4) == 6
    assert inp.k.shape == (3 * pps, 4, 2, 8) and inp.v.shape == (3 * pps, 4, 2, 8)
    pt = inp.page_table
    assert pt.shape == (3, pps) and pt.dtype == torch.int32
    assert sorted(pt.flatten().tolist()) == list(range(3 * pps))
    assert not torch.equal(pt.flatten(), torch.arange(3 * pps, dtype=torch.int32))
    assert inp.seqused_k.tolist() == [22, 9, 1] and inp.seqused_k.dtype == torch.int32
    assert inp.leftpad_k.tolist() == [3, 0, 1] and inp.leftpad_k.dtype == torch.int32


def test_gather_kv_follows_page_table_leftpad_and_seqused():
    inp = make_inputs(PAGED, 4)
    got = gather_kv(PAGED, inp)
    pt = inp.page_table.tolist()
    for b, (start, end) in enumerate([(3, 22), (0, 9), (1, 1)]):
        kb, vb = got[b]
        assert kb.shape == (end - start, 2, 8)
        for jp in range(end - start):
            j = start + jp
            assert torch.equal(kb[jp], inp.k[pt[b][j // 4], j % 4])
            assert torch.equal(vb[jp], inp.v[pt[b][j // 4], j % 4])


def test_gather_kv_varlen_and_dense():
    inp = make_inputs(VARLEN, 5)
    got = gather_kv(VARLEN, inp)
    assert [k.shape[0] for k, _ in got] == [4, 7, 2]
    assert torch.equal(got[1][0], inp.k[4:11]) and torch.equal(got[2][1], inp.v[11:13])
    s = Scenario(name="d", batch=2, seqlen_q=1, seqlen_k=6, heads_q=2, heads_kv=2, head_dim=8,
                 cache_seqlens=(6, 4), leftpad=(1, 2))
    inp = make_inputs(s, 5)
    got = gather_kv(s, inp)
    assert torch.equal(got[0][0], inp.k[0, 1:6]) and torch.equal(got[1][1], inp.v[1, 2:4])


def _amax_fp8(x, b, h_slice):
    return x[b][..., h_slice, :].float().abs().max().item()


def test_fp8_descales_use_the_range_per_batch_and_kv_head():
    inp = make_inputs(FP8, 6)
    assert inp.q.dtype == inp.k.dtype == inp.v.dtype == torch.float8_e4m3fn
    assert inp.out_dtype == torch.bfloat16
    for d in (inp.q_descale, inp.k_descale, inp.v_descale):
        assert d.shape == (2, 2) and d.dtype == torch.float32 and (d > 0).all()
    # randn amax over a few hundred values is ~3, so descale ~ 3/448
    assert (inp.k_descale > 1.0 / 448).all() and (inp.k_descale < 6.0 / 448).all()
    for b in range(2):
        for hk in range(2):
            # q heads 2*hk, 2*hk+1 map to KV head hk: their max magnitude sits on fp8's maximum
            assert _amax_fp8(inp.q, b, slice(2 * hk, 2 * hk + 2)) == 448.0
            assert _amax_fp8(inp.k, b, slice(hk, hk + 1)) == 448.0
            assert _amax_fp8(inp.v, b, slice(hk, hk + 1)) == 448.0
    assert not torch.equal(inp.q_descale, inp.k_descale)


def test_fp8_paged_descale_is_per_sequence_over_its_pages():
    inp = make_inputs(FP8_PAGED, 7)
    for b, (kb, vb) in enumerate(gather_kv(FP8_PAGED, inp)):
        for hk in range(2):
            assert kb[:, hk].float().abs().max().item() == 448.0
            assert vb[:, hk].float().abs().max().item() == 448.0


def test_fp8_varlen_descale_per_segment():
    inp = make_inputs(FP8_VARLEN, 8)
    assert inp.q_descale.shape == (2, 2)
    for b, (q0, q1) in enumerate([(0, 2), (2, 7)]):
        for hk in range(2):
            assert inp.q[q0:q1, 2 * hk:2 * hk + 2].float().abs().max().item() == 448.0


def test_alloc_outputs_poisoned_in_kernel_layouts():
    inp = make_inputs(DENSE, 0)
    o, lse = alloc_outputs(DENSE, inp)
    assert o.shape == (2, 5, 4, 16) and o.dtype == torch.bfloat16 and torch.isnan(o).all()
    assert lse.shape == (2, 4, 5) and lse.dtype == torch.float32 and torch.isnan(lse).all()
    inp = make_inputs(VARLEN, 0)
    o, lse = alloc_outputs(VARLEN, inp, poison=123.0)
    assert o.shape == (9, 4, 8) and lse.shape == (4, 9)
    assert (o == 123.0).all() and (lse == 123.0).all()


def test_to_moves_every_tensor_and_keeps_values():
    inp = make_inputs(PAGED, 9)
    moved = inp.to("cpu")
    assert moved.tensors().keys() == inp.tensors().keys()
    for n, t in moved.tensors().items():
        assert torch.equal(t, inp.tensors()[n])
    assert moved.out_dtype == inp.out_dtype


def test_values_do_not_depend_on_thread_count_and_blocks_differ(monkeypatch):
    from kernelseek import inputs
    monkeypatch.setattr(inputs, "GEN_CHUNK", 64)  # many generator blocks on a small tensor
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = make_inputs(DENSE, 3)
        torch.set_num_threads(2)
        threaded = make_inputs(DENSE, 3)
    finally:
        torch.set_num_threads(threads)
    for name, t in serial.tensors().items():
        assert torch.equal(t, threaded.tensors()[name]), name
    flat = serial.q.flatten()
    assert not torch.equal(flat[:64], flat[64:128])  # each block has its own stream
