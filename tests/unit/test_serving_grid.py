"""The serving grid (issue 26) on CPU: the rows say what the issue asks, bad rows are refused by name, the
counts match a hand count and a brute-force mask, and every row's scaled-down copy runs through
kernelseek.attention's CPU path and agrees with reference_fa3 and with an independent SDPA computation."""
import math

import pytest
import torch

from kernelseek import attention_core as core
from kernelseek import serving_counts as SC
from kernelseek import serving_grid as G
from kernelseek import serving_peers as SP
from kernelseek.reference_fa3 import attention_ref, mask_ref

ROWS = G.load_rows()


def test_rows_cover_the_issue():
    assert len(ROWS) >= 8
    assert all(r.model and r.note for r in ROWS)
    hd128 = [r for r in ROWS if r.head_dim == 128 and not r.qv]
    assert {4, 8} <= {r.group for r in hd128}
    assert {16, 64} == {r.page_size for r in ROWS}
    assert all(512 <= c <= 2048 for r in ROWS for c, _ in r.prefill)
    assert all(60 <= r.decode_count <= 250 for r in ROWS)
    ctx = [k for r in ROWS for k in r.k_lens()]
    assert min(ctx) >= 1024 and max(ctx) == 32768
    mla = [r for r in ROWS if r.qv]
    assert len(mla) == 1 and (mla[0].head_dim, mla[0].dv, mla[0].heads_kv) == (64, 512, 1) and "DeepSeek" in mla[0].model
    chunked = [r for r in ROWS if r.attention_chunk]
    assert len(chunked) == 1 and "Llama 4" in chunked[0].model
    c = chunked[0].attention_chunk
    assert all((k - q) // c != (k - 1) // c for q, k in chunked[0].prefill), "every prompt chunk crosses a chunk boundary"


def test_decode_contexts_are_deterministic_and_in_range():
    r = ROWS[2]
    a, b = r.decode_contexts(), G.load_rows()[2].decode_contexts()
    assert a == b and len(a) == r.decode_count
    lo, hi = r.decode_context
    assert all(lo <= x <= hi for x in a) and len(set(a)) > r.decode_count // 2
    assert r.q_lens()[:r.decode_count] == [1] * r.decode_count


BAD = [
    ("extra: 1", "unknown field 'extra'"),
    ("prefill: [[600, 500]]", "field 'prefill'"),
    ("decode: {count: 3}", "field 'decode'"),
    ("heads_kv: 3", "field 'heads_kv'"),
    ("qv: true", "field 'qv'"),
    ("attention_chunk: 100", "field 'attention_chunk'"),
    ("page_size: 0", "field 'page_size'"),
]


@pytest.mark.parametrize("patch, msg", BAD, ids=[b[0] for b in BAD])
def test_bad_rows_name_the_file_row_and_field(tmp_path, patch, msg):
    base = dict(name="x1", model="m", heads_q="8", heads_kv="2", head_dim="128", page_size="16",
                prefill="[[64, 128]]", decode="{count: 2, context: [100, 200]}")
    key = patch.split(":")[0]
    base[key] = patch.split(": ", 1)[1]
    body = ", ".join(f"{k}: {v}" for k, v in base.items())
    p = tmp_path / "g.yaml"
    p.write_text(f"grid: serving\nrows:\n- {{{body}}}\n")
    with pytest.raises(G.GridError) as e:
        G.load_rows(p)
    assert str(p) in str(e.value) and "x1" in str(e.value) and msg in str(e.value)


def test_duplicate_names_refused(tmp_path):
    row = "{name: a, model: m, heads_q: 4, heads_kv: 2, head_dim: 64, page_size: 16, prefill: [[4, 8]], decode: {count: 1, context: [5, 9]}}"
    p = tmp_path / "g.yaml"
    p.write_text(f"rows:\n- {row}\n- {row}\n")
    with pytest.raises(G.GridError, match="appears twice"):
        G.load_rows(p)


def _tiny(chunk=0):
    return G.Row(name="tiny", model="hand", heads_q=4, heads_kv=2, head_dim=8, page_size=4, prefill=((3, 5),),
                 decode_count=2, decode_context=(4, 6), attention_chunk=chunk)


def test_counts_hand_count():
    r = _tiny()
    # decode contexts: 4 + int(2 * frac(0.618)) = 5, 4 + int(2 * frac(1.236)) = 4; the chunk: 3 queries at 2, 3, 4 of 5 keys
    assert r.k_lens() == [5, 4, 5] and r.q_lens() == [1, 1, 3]
    assert SC.attended(r) == 5 + 4 + (3 + 4 + 5)
    assert SC.attended(r, prefill_only=True) == 12
    assert SC.flops(r) == 2 * 4 * 21 * (8 + 8)
    parts = SC.bytes_parts(r)
    assert parts == {"kv": (5 + 4 + 5) * 2 * (8 + 8) * 2, "q": 5 * 4 * 8 * 2, "o": 5 * 4 * 8 * 2, "lse": 5 * 4 * 4}
    assert SC.min_bytes(r) == 896 + 320 + 320 + 80
    # attention_chunk 4: decode at p 4 of 5 keys sees key 4 only; at p 3 of 4 keys, keys 0-3;
    # the chunk's rows at 2, 3, 4 see 3, 4 and 1 keys; keys seen: 1 + 4 + 5
    c = _tiny(chunk=4)
    assert SC.attended(c) == 1 + 4 + 3 + 4 + 1
    assert SC.bytes_parts(c)["kv"] == (1 + 4 + 5) * 2 * 16 * 2


def test_qv_counts_both_head_dims():
    r = G.Row(name="mla", model="hand", heads_q=2, heads_kv=1, head_dim=4, head_dim_v=8, qv=True, page_size=4,
              prefill=((2, 3),), decode_count=0, decode_context=(1, 1))
    assert r.dqk == 12 and SC.attended(r) == 2 + 3
    assert SC.flops(r) == 2 * 2 * 5 * (12 + 8)
    assert SC.bytes_parts(r) == {"kv": 3 * 1 * 12 * 2, "q": 2 * 2 * 12 * 2, "o": 2 * 2 * 8 * 2, "lse": 2 * 2 * 4}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_counts_match_a_brute_force_mask(row):
    s = G.scaled(row)
    att = seen = 0
    for sq, sk in zip(s.q_lens(), s.k_lens()):
        m = mask_ref(sq, sk, causal=s.causal, chunk=s.attention_chunk)
        att += int(m.sum())
        seen += int(m.any(0).sum())
    assert SC.attended(s) == att
    assert SC.bytes_parts(s)["kv"] == seen * s.heads_kv * (s.head_dim + s.dv) * 2


def test_bound_and_rates():
    r = _tiny()
    b = SC.bound(r, hbm_gbps=1.0, tflops=1e-9)          # 1 GB/s, 1 kFLOP/s: both limits in reach
    assert b.bytes_ms == pytest.approx(1616 / 1e9 * 1e3) and b.flops_ms == pytest.approx(2688 / 1e3 * 1e3)
    assert b.limit == "flops" and b.ms == b.flops_ms
    rt = b.rates(2 * b.ms)
    assert rt["frac_bound"] == pytest.approx(0.5) and rt["frac_flops"] == pytest.approx(0.5)
    assert SC.bound_for_gpu(r, "NVIDIA H200").hbm_gbps == 4800.0 and SC.bound_for_gpu(r, "some gpu") is None
    real = {x.name: SC.bound(x, 4800.0, 989.0).limit for x in ROWS}
    assert real["s03_llama3_8b_1x512_dec250_ctx1k-8k_p16"] == "bytes"
    assert real["s05_llama3_70b_1x2048_dec60_ctx8k-32k_p64"] == "flops"


def test_scaled_keeps_the_structure():
    for r in ROWS:
        s = G.scaled(r)
        assert (s.group, s.head_dim, s.dv, s.qv, s.page_size, s.causal, len(s.prefill)) == \
               (r.group, r.head_dim, r.dv, r.qv, r.page_size, r.causal, len(r.prefill))
        assert max(s.q_lens()) * s.group > 64 and 0 < s.decode_count <= r.decode_count
        assert bool(s.attention_chunk) == bool(r.attention_chunk)
        if s.attention_chunk:
            assert s.attention_chunk % s.page_size == 0
            assert any((k - q) // s.attention_chunk != (k - 1) // s.attention_chunk for q, k in s.prefill)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_every_row_runs_and_agrees_with_two_references(row):
    call = G.make_call(G.scaled(row), device="cpu", seed=1)
    o, lse = G.ours(call, return_lse=True)
    steps = list(core.RECORD["steps"])
    ro, rl = G.reference(call)
    ind = G.independent(call, dtype=torch.float64, block=16)
    assert (ind - ro).abs().max().item() < 1e-10                 # two float64 answers, written apart
    assert (o.double() - ro).abs().max().item() < 2e-2          # ours: rounded to bf16
    assert (lse.double() - rl).abs().max().item() < 1e-4
    assert o.shape == (sum(call.row.q_lens()), call.row.heads_q, call.row.dv)
    if row.qv:   # [q, qv] . [k, v]: head dim 576 (the naive wide kernel), so the keys are gathered
        assert steps[-2:] == ["packed", "gather-pages"], steps
    else:   # the cache read in place: one kernel call (decodes on its decode path, chunks on its prefill;
        # attention_chunk is the kernel's since ABI 3)
        assert steps == [] and len(core.RECORD["paths"]) == 1, core.RECORD
    assert ("qv-concat" in steps) == row.qv


def test_independent_sees_the_mask():
    """A key that no query may see (a later position) changes nothing; one inside the mask does."""
    r = G.scaled(ROWS[0], decodes=1)
    call = G.make_call(r, device="cpu", seed=2)
    before = G.independent(call)
    b, ps = r.decode_count, r.page_size           # the first prefill sequence: its cache has keys 0..Sk-1
    sk = r.k_lens()[b]
    page = int(call.t["table"][b, (sk - 1) // ps])
    call.t["kc"][page, (sk - 1) % ps] += 5.0      # the last key: only the chunk's last query sees it
    after = G.independent(call)
    rows = slice(sum(r.q_lens()[:b]), sum(r.q_lens()[:b + 1]))
    diff = (after - before).abs().amax(dim=(1, 2))
    assert diff[rows][:-1].max() == 0 and diff[rows][-1] > 0


def test_virtual_batches_compute_the_chunked_call():
    r = G.scaled(next(x for x in ROWS if x.attention_chunk))
    call = G.make_call(r, device="cpu", seed=5)
    vb = SP.batch_of(call, need_chunk_free=True)
    assert vb.virtual and sum(vb.q_lens) == sum(r.q_lens()) and len(vb.q_lens) > len(r.q_lens())
    assert max(vb.k_lens) <= r.attention_chunk
    o1, l1 = G.reference(call)
    o2, l2 = attention_ref(call.t["q"], call.t["kc"], call.t["vc"], cu_seqlens_q=vb.cu_q, seqused_k=vb.seqused,
                           page_table=vb.table, causal=True, softmax_scale=r.softmax_scale)
    assert (o1 - o2).abs().max().item() < 1e-12 and torch.equal(torch.isinf(l1), torch.isinf(l2))
    with pytest.raises(ValueError, match="multiple of page size"):
        SP.virtual_batches([1], [10], call.t["table"], 16, 40)


def test_same_batch_without_chunk_is_the_call_itself():
    call = G.make_call(G.scaled(ROWS[0]), device="cpu")
    b = SP.batch_of(call, need_chunk_free=True)
    assert not b.virtual and b.table is call.t["table"] and b.q_lens == call.row.q_lens()


def test_baselines_without_a_gpu_say_why():
    call = G.make_call(G.scaled(ROWS[0]), device="cpu")
    ps = SP.peers(call)
    assert [p.name for p in ps] == ["fa3", "flashinfer", "fa4"]
    if not torch.cuda.is_available():
        assert all(p.fn is None and p.why for p in ps)


def test_mix_names_the_batch():
    r = ROWS[0]
    assert r.mix() == "prefill 512+512+512+512 + 64 decodes, ctx 1024-4096, page 16"
    assert math.isclose(ROWS[7].softmax_scale, 192 ** -0.5)
