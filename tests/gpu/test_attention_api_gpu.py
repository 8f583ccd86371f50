"""kernelseek.attention on the GPU against the reference, through the same check as the harness."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import attention as A  # noqa: E402
from kernelseek.check import check_output  # noqa: E402
from kernelseek.inputs import make_inputs  # noqa: E402
from kernelseek.reference import attention_ref  # noqa: E402
from kernelseek.scenarios import Scenario  # noqa: E402

CASES = [
    dict(batch=2, seqlen_q=300, seqlen_k=513, heads_q=4, heads_kv=2, head_dim=128, causal=True),          # fast path
    dict(batch=1, seqlen_q=256, seqlen_k=256, heads_q=2, heads_kv=2, head_dim=64, dtype="fp16"),          # fast path
    dict(batch=2, seqlen_q=77, seqlen_k=200, heads_q=4, heads_kv=1, head_dim=96, causal=True, window=(32, 0),
         softcap=30.0, sinks=True),
    dict(seqlens_q=(5, 1, 40), seqlens_k=(60, 9, 40), heads_q=4, heads_kv=2, head_dim=128, causal=True),   # varlen
    dict(batch=3, seqlen_q=1, seqlen_k=200, heads_q=8, heads_kv=2, head_dim=128, page_size=16,
         cache_seqlens=(200, 37, 5), leftpad=(3, 0, 1), kind="decode"),                                  # paged
    dict(batch=1, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=2, head_dim=128, dtype="fp8", causal=True),
]
# attention_chunk in the kernel (ABI 3), one case per path, awkward lengths; chunks that tiles straddle
CHUNK_CASES = [
    dict(batch=2, seqlen_q=1000, seqlen_k=1000, heads_q=4, heads_kv=2, head_dim=128, causal=True, attention_chunk=256),
    dict(batch=1, seqlen_q=500, seqlen_k=300, heads_q=2, heads_kv=2, head_dim=64, dtype="fp16",
         attention_chunk=100),                                   # non-causal; rows at p < 0 see no key
    dict(batch=2, seqlen_q=333, seqlen_k=901, heads_q=4, heads_kv=1, head_dim=96, causal=True, window=(50, 0),
         softcap=30.0, sinks=True, attention_chunk=64),
    dict(batch=1, seqlen_q=700, seqlen_k=700, heads_q=2, heads_kv=2, head_dim=256, causal=True, attention_chunk=100),
    dict(batch=1, seqlen_q=640, seqlen_k=1111, heads_q=4, heads_kv=2, head_dim=192, head_dim_v=128, causal=True,
         attention_chunk=300),
    dict(batch=2, seqlen_q=517, seqlen_k=517, heads_q=4, heads_kv=2, head_dim=128, dtype="fp8", causal=True,
         attention_chunk=192),                                   # fp8 prefill
    dict(seqlens_q=(1500, 333, 1), seqlens_k=(1500, 333, 2049), heads_q=4, heads_kv=2, head_dim=128, causal=True,
         attention_chunk=512),                                   # varlen prefill
    dict(batch=3, seqlen_q=1, seqlen_k=4096, heads_q=8, heads_kv=2, head_dim=128, page_size=16,
         cache_seqlens=(4096, 2049, 7), leftpad=(3, 0, 1), kind="decode", attention_chunk=1024),   # paged decode
    dict(batch=3, seqlen_q=3, seqlen_k=3000, heads_q=8, heads_kv=8, head_dim=64, dtype="fp8", page_size=64,
         cache_seqlens=(3000, 1025, 64), kind="decode", causal=True, attention_chunk=512),   # fp8 paged decode
    dict(batch=2, seqlen_q=200, seqlen_k=2048, heads_q=4, heads_kv=2, head_dim=128, page_size=64,
         cache_seqlens=(2000, 777), causal=True, attention_chunk=256),                       # paged prefill
]
FAST = {"decode", "prefill", "prefill_fp8", "mixed", "gather", "mixed_gather", "qv", "empty"}


@pytest.mark.parametrize("kw", CASES + CHUNK_CASES, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items())[:60])
def test_api_matches_reference(kw):
    from kernelseek import attention_core as C
    s = Scenario(name="api", **kw)
    inp = make_inputs(s, seed=11, device="cuda", gen_device="cuda")
    common = dict(softmax_scale=s.softmax_scale, causal=s.causal, window_size=s.window, softcap=s.softcap,
                  s_aux=inp.sinks, q_descale=inp.q_descale, k_descale=inp.k_descale, v_descale=inp.v_descale,
                  attention_chunk=s.attention_chunk)
    if s.varlen:
        o, lse = A.flash_attn_varlen_func(inp.q, inp.k, inp.v, inp.cu_seqlens_q, inp.cu_seqlens_k, max(s.seqlens_q),
                                          max(s.seqlens_k), return_attn_probs=True, **common)
    elif s.paged or s.cache_seqlens is not None:
        o, lse = A.flash_attn_with_kvcache(inp.q, inp.k, inp.v, cache_seqlens=inp.seqused_k, page_table=inp.page_table,
                                           cache_leftpad=inp.leftpad_k, return_softmax_lse=True, **common)
    else:
        o, lse = A.flash_attn_func(inp.q, inp.k, inp.v, return_attn_probs=True, **common)
    torch.cuda.synchronize()
    c = check_output(s, o, lse, attention_ref(s, inp, "fp32"), attention_ref(s, inp, "lowp"))
    assert c.passed, c.reason
    if s.attention_chunk:   # the chunk is the kernel's: one call, on a fast path
        assert C.RECORD["steps"] == [] and len(C.RECORD["paths"]) == 1, C.RECORD
        assert C.RECORD["paths"][0] in FAST, C.RECORD


@pytest.mark.parametrize("dv, dtype", [(64, torch.bfloat16), (256, torch.float16), (256, torch.float8_e4m3fn)])
def test_varlen_batch_with_no_keys_at_all(dv, dtype):
    """FA3's test_flash_attn_varlen_output at 4096 (batch 2, both key lengths 0): the kernel used to get
    null k/v pointers and return KSEEK_ERR_INVALID; now O = 0, lse = -inf with no launch."""
    from kernelseek import attention_core as C
    d = dv if dtype == torch.float8_e4m3fn else 64
    q = torch.randn(8169, 6, d, device="cuda").to(dtype)
    k, v = torch.empty(0, 1, d, device="cuda").to(dtype), torch.empty(0, 1, dv, device="cuda").to(dtype)
    cu_q = torch.tensor([0, 4085, 8169], dtype=torch.int32, device="cuda")
    cu_k = torch.zeros(3, dtype=torch.int32, device="cuda")
    o, lse = A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 4085, 0, softcap=15.0, return_attn_probs=True)
    torch.cuda.synchronize()
    assert C.RECORD["paths"] == ["empty"] and (o == 0).all() and torch.isinf(lse).all() and (lse < 0).all()
