"""serving_bench's CPU-side parts: the check of our call (and of each baseline) against the fp32 answer, and
the table. Timing needs the GPU (tools/gpu_serving.sh, tools/gpu_paged.sh; H200 results in data/serving/)."""
import torch

from kernelseek import serving_bench as SB
from kernelseek import serving_grid as G


def _call():
    return G.make_call(G.scaled(G.load_rows()[0]), device="cpu", seed=9)


def test_check_passes_the_right_answer_and_records_the_route():
    call = _call()
    rec, ran = SB.check(call, G.independent(call, dtype=torch.float32))
    assert rec["ok"] and rec["max_err"] < 1e-2 and rec["steps"] == []   # the paged cache read in place (v13)
    assert set(rec["baselines"]) == {"fa3", "flashinfer", "fa4"}
    if not torch.cuda.is_available():
        assert ran == [] and all(v["why"] for v in rec["baselines"].values())


def test_check_fails_a_wrong_answer():
    call = _call()
    ref = G.independent(call, dtype=torch.float32)
    ref[-1, 0, 0] += 0.1                       # one element of the last prefill row off by 0.1
    rec, _ = SB.check(call, ref)
    assert not rec["ok"] and rec["max_err"] > SB.O_TOL


def test_table_lists_every_row_and_the_failure():
    rows = [{"name": "a_row", "ok": True, "times": {"ours": {"time_ms": 1.5, "graph_ms": 1.25, "host_ms": 0.2}},
             "best_call": "fa3", "best_call_ms": 1.2, "best_graph_ms": 1.0, "speedup_call": 0.8, "speedup_graph": 0.8,
             "bound_ms": 0.5, "limit": "bytes", "ours_graph_rates": {"frac_bound": 0.4}},
            {"name": "b_row", "ok": False, "error": "RuntimeError: out of memory"}]
    lines = SB.table(rows).splitlines()
    assert len(lines) == 3 and lines[0].split()[0] == "row"
    a = lines[1].split()
    assert a[:5] == ["a_row", "y", "1.500", "1.250", "0.200"] and a[5:] == ["fa3", "1.200", "1.000", "0.800", "0.800",
                                                                          "0.500", "bytes", "40.0"]
    assert lines[2].split()[:2] == ["b_row", "N"] and "out of memory" in lines[2]


def test_cross_check_runs_reference_fa3_where_it_fits(monkeypatch):
    call = _call()
    ind = G.independent(call, dtype=torch.float32)
    res = SB.cross_check(call, ind)
    assert res["ref_fa3"] == "run" and res["ref_fa3_err"] < 1e-5          # fp32 against float64
    monkeypatch.setattr(SB, "REF_MAX_SCORES_BYTES", 1e3)
    assert SB.cross_check(call, ind)["ref_fa3"].startswith("not run: a ")


def test_meta_records_the_variant_the_run_built(monkeypatch):
    """A serving A/B (tools/gpu_v14b.sh ab) runs the same rows with and without KSEEK_ATTENTION_DEFINES:
    each run's meta must say which build it timed."""
    from kernelseek import serving_bench as SB
    monkeypatch.setenv("KSEEK_ATTENTION_DEFINES", "KSEEK_FA3_MIXED_GATHER=1")
    assert SB.meta()["build_defines"] == "KSEEK_FA3_MIXED_GATHER=1"
    monkeypatch.delenv("KSEEK_ATTENTION_DEFINES")
    assert SB.meta()["build_defines"] == ""
