"""A kernel folder built as a variant, evaluated end to end on the GPU through the real worker.

The folder nv/nv.cu wraps naive_fwd.cu (copied beside it with its headers) and, built with
-DNV_REFUSE=1, answers every call with KSEEK_ERR_UNSUPPORTED: the plain build passes smoke's checks,
the variant's rows are errors, and each run records its build_defines.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

WRAP = """// naive_fwd.cu behind a switch: NV_REFUSE=1 refuses every call (a build variant for the test)
#define kseek_fwd naive_inner_fwd
#include "../naive_fwd.cu"
#undef kseek_fwd
#ifndef NV_REFUSE
#define NV_REFUSE 0
#endif
extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t s) {
  return NV_REFUSE ? KSEEK_ERR_UNSUPPORTED : naive_inner_fwd(p, s);
}
"""


def test_folder_variant_through_the_worker(tmp_path):
    from kernelseek.evaluate import evaluate
    from kernelseek.kernel_source import copy_kernel
    from kernelseek.build import REPO_KERNELS
    copy_kernel(REPO_KERNELS / "naive_fwd.cu", tmp_path)
    (tmp_path / "nv").mkdir()
    (tmp_path / "nv" / "nv.cu").write_text(WRAP)
    common = dict(runs_dir=str(tmp_path / "runs"), check_only=True, progress=False)
    _, plain, pmeta = evaluate(str(tmp_path / "nv"), "smoke", "best", **common)
    assert all(r.status == "passed" for r in plain), [(r.scenario, r.reason) for r in plain if r.status != "passed"]
    _, var, vmeta = evaluate(str(tmp_path / "nv"), "smoke", "best", defines={"NV_REFUSE": 1}, **common)
    assert all(r.status == "error" and "status 1" in r.reason for r in var), [(r.scenario, r.reason) for r in var]
    assert (pmeta["build_defines"], vmeta["build_defines"]) == ({}, {"NV_REFUSE": "1"})
    assert pmeta["kernel_sha256"] == vmeta["kernel_sha256"]


def _hopper_paths_all_correct(tmp_path, scenarios, grid="hopper", defines=None):
    """The rows `scenarios` of `grid` checked (check only) on kernels/fa3_hopper's default build (v14: the
    four variants below are its defaults since session 13), or built with `defines`: asserts every row
    passed and the build was recorded; returns each row's path (features["path"])."""
    from kernelseek.evaluate import evaluate
    defines = {k: str(v) for k, v in (defines or {}).items()}
    _, rows, meta = evaluate("kernels/fa3_hopper", grid, "best", scenarios=scenarios,
                             runs_dir=str(tmp_path / "runs"), check_only=True, progress=False, defines=defines)
    assert meta["build_defines"] == defines
    assert all(r.status == "passed" for r in rows), [(r.scenario, r.reason[:200]) for r in rows if r.status != "passed"]
    return {r.scenario: r.features.get("path") for r in rows}


def test_page_gather_takes_every_paged_row_off_the_naive_fallback(tmp_path):
    """KSEEK_FA3_PAGE_GATHER >= 1 (default 2 since v14; kernels/fa3_hopper/page_gather.cuh, session 11): the hopper grid's paged
    rows that no fast path reads in place (fp8 K/V, page size 1, paged left padding; all of them ran on the
    naive fallback at c8cb9ac) are copied to a dense cache and run on a fast path, correctly."""
    from kernelseek.scenarios import load_grid
    hard = {s.name for s in load_grid("hopper")
            if s.paged and (s.dtype == "fp8" or s.page_size % 8 or s.leftpad is not None)}
    paths = _hopper_paths_all_correct(tmp_path, "paged_,decode_")
    assert len(hard) == 54 and hard <= set(paths)
    assert not [n for n in hard if paths[n] == "naive"], {n: paths[n] for n in hard}
    assert "gather" in {paths[n] for n in hard}


def test_decode_fp8_takes_every_fp8_decode_row_it_supports(tmp_path):
    """KSEEK_FA3_DECODE_FP8=1 (default since v14; decode.cuh's splitkv_f8_kernel, NOTES v13e): every hopper decode row
    is correct with the variant (bf16/fp16 rows included: their kernels are unchanged), and every fp8
    decode row runs on the split-KV decode path except the hd192/Dv128 ones, which dec::supported
    refuses by design (it needs D == Dv, in {64, 128, 256}, as for bf16): they stay where they ran
    before (paged: the naive fallback; contiguous: the fp8 prefill)."""
    from kernelseek.scenarios import load_grid
    fp8 = {s.name: s for s in load_grid("hopper") if s.name.startswith("decode_") and "fp8" in s.name}
    refused = {"decode_d192v128_fp8_page16_q1_gqa4_b8c2000lp_plain",
               "decode_d192v128_fp8_page16_q4causal_mqa_b32c512_cap30sinks",
               "decode_d192v128_fp8_page128_q1_mha_b2c3000s1_plain",
               "decode_d192v128_fp8_page128_q4causal_gqa8_b6c1500lps3_plain",
               "decode_d192v128_fp8_contig_q1_gqa16_b1c2047_plain",
               "decode_d192v128_fp8_contig_q4causal_gqa4_b16c1024_cap30"}
    assert len(fp8) == 24 and refused == {n for n, s in fp8.items() if (s.head_dim_v or s.head_dim) != s.head_dim}
    paths = _hopper_paths_all_correct(tmp_path, "decode_")
    assert set(fp8) <= set(paths)
    assert {n: paths[n] for n in fp8 if n not in refused and paths[n] != "decode"} == {}
    assert not [n for n in refused if paths[n] == "decode"], {n: paths[n] for n in refused}


def test_decode_dv_takes_every_16bit_d192v128_decode_row(tmp_path):
    """KSEEK_FA3_DECODE_DV=1 (default since v14; decode.cuh's splitkv_kernel<T, 192, 128>, NOTES v13g): every hopper decode
    row is correct with the variant (the D == Dv kernels are unchanged), and the six 16-bit hd192/Dv128
    decode rows (all bf16: the grid's decode rows have no fp16) run on the split-KV decode path, where
    the default build runs them on the prefill or the naive fallback. The fp8 hd192/Dv128 rows stay
    off it (dec::supported refuses fp8 with D != Dv in every build)."""
    from kernelseek.scenarios import load_grid
    dv = {s.name for s in load_grid("hopper")
          if s.name.startswith("decode_") and s.dtype in ("bf16", "fp16") and (s.head_dim_v or s.head_dim) != s.head_dim}
    assert dv == {"decode_d192v128_bf16_page16_q1_gqa16_b32c512_cap30",
                  "decode_d192v128_bf16_page16_q4causal_gqa4_b2c3000s1_plain",
                  "decode_d192v128_bf16_page128_q1_mqa_b6c1500lps3_sinks",
                  "decode_d192v128_bf16_page128_q4causal_mha_b1c2047_plain",
                  "decode_d192v128_bf16_contig_q1_gqa8_b16c1024_swa256",
                  "decode_d192v128_bf16_contig_q4causal_gqa16_b4c4096s3_plain"}
    paths = _hopper_paths_all_correct(tmp_path, "decode_")
    assert dv <= set(paths)
    assert {n: paths[n] for n in dv if paths[n] != "decode"} == {}
    assert not [n for n in paths if n.startswith("decode_d192v128_fp8") and paths[n] == "decode"]


def test_page_gather_2_takes_the_paged_chunked_prefills_through_a_dense_copy(tmp_path):
    """KSEEK_FA3_PAGE_GATHER=2 (default since v14; NOTES v13f): production's chunked prefills over a page-16 cache (p06,
    p07), which the prefill otherwise reads in place box by box, run on a copy of their pages; p05, the
    same shape over a contiguous cache, is untouched."""
    paths = _hopper_paths_all_correct(tmp_path, "5-7", grid="production")
    assert paths == {"p05_llama3_8b_chunk_1k_over_8k": "prefill", "p06_llama3_8b_chunk_1k_over_8k_paged": "gather",
                     "p07_llama3_70b_chunk_2k_over_16k_paged": "gather"}, paths


def test_mixed_gather_runs_the_serving_rows_prefill_part_over_dense_slots(monkeypatch):
    """-DKSEEK_FA3_MIXED_GATHER=1 (session 13, never run on a GPU before this test): a serving step over a
    paged cache the prefill reads in place (pages of 16 or 64 rows) copies its long sequences' pages into
    dense slots and runs its prefill part there (kseek_last_path 6, "mixed_gather"); the decodes stay in
    place. Every such row (the MLA and chunked rows take other routes) against an fp32 computation, at the
    real sizes, and with one slot (KSEEK_FA3_MIXED_GATHER_SLOTS=1), where the other long sequences of a
    step take the second, in-place prefill launch: both must be right."""
    from kernelseek import attention_core as core
    from kernelseek import serving_grid as G
    rows = [r for r in G.load_rows() if not r.qv and not r.attention_chunk]
    assert len(rows) == 7
    for defines in ("KSEEK_FA3_MIXED_GATHER=1", "KSEEK_FA3_MIXED_GATHER=1,KSEEK_FA3_MIXED_GATHER_SLOTS=1"):
        monkeypatch.setenv("KSEEK_ATTENTION_DEFINES", defines)
        for row in rows:
            call = G.make_call(row, device="cuda", seed=5)
            o = G.ours(call)
            torch.cuda.synchronize()
            assert core.RECORD["paths"] == ["mixed_gather"], (defines, row.name, core.RECORD)
            ref = G.independent(call, dtype=torch.float32)
            err = float((o.float() - ref).abs().max())
            assert err <= 2e-2, (defines, row.name, err)
            del call, o, ref
            torch.cuda.empty_cache()
