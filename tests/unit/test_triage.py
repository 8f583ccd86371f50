"""Gap triage: deficit shares (hand-computed), groups, failures first, compare, timeline, CLI."""
import json
import math
from pathlib import Path

import pytest

from kernelseek import ledger, results, store, triage
from kernelseek.cli import main
from kernelseek.results import Row


def _row(name, speedup, hd=128, causal=False, status="passed", **kw):
    base = 1.0
    t = base / speedup if speedup else 1.0
    return Row(scenario=name, status=status, features={"head_dim": hd, "causal": causal, "dtype": "bf16"},
               time_ms=t, baseline_ms=base if speedup else None, speedup=speedup,
               baseline_status="passed" if speedup else "n/a", baseline="cudnn" if speedup else None, **kw)


@pytest.fixture
def rows():
    return [
        _row("A", 0.5, hd=64, causal=True),
        _row("B", 0.8, causal=True),
        _row("C", 2.0, hd=64),
        _row("D", 1.0),
        _row("E", None, status="failed", reason="max_err 3.1 > bound 0.02"),
        Row(scenario="F", status="passed", features={"head_dim": 128, "causal": False, "dtype": "bf16"},
            time_ms=0.3, baseline_status="n/a", baseline_reason="no baseline supports softcap"),
    ]


# hand computation, N = 4 timed rows (A, B, C, D):
#   shares: A = -ln(0.5)/4 = 0.1732868, B = -ln(0.8)/4 = 0.0557859; deficit = 0.2290727
#   surplus: ln(2)/4 + ln(1)/4 = 0.1732868;  geomean = exp(0.1732868 - 0.2290727) = 0.8**0.25
SHARE_A, SHARE_B = 0.17328679513998632, 0.05578588782855243


def test_shares_sum_to_deficit(rows):
    t = triage.triage(rows)
    s = t.summary
    assert s["timed"] == 4 and s["failed"] == 1 and s["na"] == 1 and s["below"] == 2
    assert s["deficit"] == pytest.approx(SHARE_A + SHARE_B)
    assert s["surplus"] == pytest.approx(math.log(2) / 4)
    assert s["geomean"] == pytest.approx(0.8 ** 0.25)
    assert s["geomean"] == pytest.approx(results.summarize(rows)["geomean_speedup"])
    below = t.rows[t.rows["class"] == "below"].set_index("scenario")
    assert below.loc["A", "share"] == pytest.approx(SHARE_A)
    assert below.loc["B", "share"] == pytest.approx(SHARE_B)
    assert below["share"].sum() == pytest.approx(s["deficit"])
    # bringing A to parity multiplies the geomean by exp(share) = 0.5 ** -0.25
    assert below.loc["A", "geomean_x_if_parity"] == pytest.approx(2 ** 0.25)
    above = t.rows[t.rows["class"] == "above"].set_index("scenario")
    assert above.loc["C", "surplus"] == pytest.approx(math.log(2) / 4)
    assert above.loc["D", "surplus"] == 0.0


def test_failures_first_then_largest_share(rows):
    t = triage.triage(rows)
    assert list(t.rows["scenario"]) == ["E", "F", "A", "B", "D", "C"]
    assert "max_err 3.1" in t.rows.iloc[0]["reason"]
    assert t.rows.iloc[1]["reason"] == "no baseline supports softcap"
    text = t.text()
    assert text.index("not timed") < text.index("below parity (share")
    assert "softcap" in text and "failed" in text


def test_groups_split_the_deficit(rows):
    g = triage.group_table(rows)
    assert set(g["feature"]) == {"head_dim", "causal", "dtype"}
    hd = g[g["feature"] == "head_dim"].set_index("value")
    assert hd.loc["64", "deficit"] == pytest.approx(SHARE_A)
    assert hd.loc["128", "deficit"] == pytest.approx(SHARE_B)
    assert hd["deficit"].sum() == pytest.approx(SHARE_A + SHARE_B)
    assert hd.loc["128", "failed"] == 1 and hd.loc["128", "na"] == 1
    assert hd.loc["64", "geomean"] == pytest.approx(1.0)          # sqrt(0.5 * 2)
    # hd64 holds 2 of 4 timed rows but 75.6% of the deficit
    assert hd.loc["64", "excess"] == pytest.approx(SHARE_A / (SHARE_A + SHARE_B) / 0.5)
    causal = g[g["feature"] == "causal"].set_index("value")
    assert causal.loc["True", "deficit"] == pytest.approx(SHARE_A + SHARE_B)
    assert causal.loc["False", "deficit"] == 0.0


def test_dataframe_input_matches_rows(rows):
    a = triage.triage(rows).summary
    b = triage.triage(results.to_frame(rows)).summary
    assert a == b


def test_compare_against_given_noise():
    before = [_row("same", 1.0), _row("up", 1.0), _row("down", 1.0), _row("broke", 1.0)]
    after = [_row("same", 1.02), _row("up", 1.10), _row("down", 0.90),
             _row("broke", None, status="error", reason="illegal address")]
    df = triage.compare(before, after, noise=0.03).set_index("scenario")
    assert df.loc["same", "moved"] == ""
    assert df.loc["up", "moved"] == "better" and df.loc["up", "ratio"] == pytest.approx(1.10)
    assert df.loc["up", "time_change"] == pytest.approx(1 / 1.1 - 1)
    assert df.loc["down", "moved"] == "worse"
    assert df.loc["broke", "moved"] == "status"
    text = triage.format_compare(df.reset_index(), before, after)
    assert "better: 1" in text and "worse: 1" in text and "within noise: 1" in text


def test_compare_estimates_noise_from_spread():
    def spread(name, s, half):
        r = _row(name, s)
        r.time_p10_ms, r.time_p90_ms = r.time_ms * (1 - half), r.time_ms * (1 + half)
        return r
    before = [spread("x", 1.0, 0.05), _row("y", 1.0)]
    after = [spread("x", 1.08, 0.05), _row("y", 1.08)]
    df = triage.compare(before, after).set_index("scenario")
    assert df.loc["x", "noise"] == pytest.approx(0.10)       # 0.05 + 0.05: 8% is within it
    assert df.loc["x", "moved"] == ""
    assert df.loc["y", "noise"] == triage.DEFAULT_NOISE       # no p10/p90: 3%, so 8% moved
    assert df.loc["y", "moved"] == "better"


def test_timeline_from_run_dirs_and_pairs(tmp_path, rows):
    d1 = results.new_run_dir(tmp_path, "one")
    results.save(d1, rows, {"time": "2026-11-30T10:00:00"})
    better = [_row("A", 0.9), _row("B", 1.2)]
    d2 = tmp_path / "evals" / "2"
    d2.mkdir(parents=True)
    results.save(d2, better, {})
    tl = triage.timeline([d1, ("t2", d2), ("t3", [_row("A", 0.25)])])
    assert list(tl["eval"]) == [0, 1, 2]
    assert tl.loc[0, "time"] == "2026-11-30T10:00:00" and tl.loc[1, "time"] == "t2"
    assert tl.loc[0, "geomean"] == pytest.approx(0.8 ** 0.25)
    assert tl.loc[0, "worst_scenario"] == "A" and tl.loc[0, "worst_speedup"] == 0.5
    assert tl.loc[1, "geomean"] == pytest.approx(math.sqrt(0.9 * 1.2))
    assert tl.loc[2, "worst_speedup"] == 0.25
    assert triage.campaign_evals(tmp_path) == []          # no trace, no ledger: not a campaign's evaluation
    (tmp_path / "trace.jsonl").write_text(json.dumps({"type": "evaluation", "n": 2, "dir": "evals/2",
                                                      "results_sha256": ledger.digest(d2 / "results.json")}) + "\n")
    assert triage.campaign_evals(tmp_path) == [d2]        # recorded by the loop (kernelseek.ledger)


def test_cli_triage(tmp_path, rows, capsys):
    d1 = results.new_run_dir(tmp_path, "a")
    results.save(d1, rows, {})
    d2 = results.new_run_dir(tmp_path, "b")
    results.save(d2, [_row("A", 0.9), _row("B", 0.8), _row("C", 2.0), _row("D", 1.0)], {})
    png = tmp_path / "bars.png"
    assert main(["triage", str(d1), "--compare", str(d2), "--noise", "0.03", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "deficit" in out and "status: 2" in out and "better: 1" in out
    assert png.stat().st_size > 1000
    assert main(["triage", str(tmp_path / "missing")]) == 2


def test_triage_on_a_real_h200_bench26_run():
    """The committed H200 run (data/runs/): shares of the below-parity rows sum to the deficit,
    and exp(surplus - deficit) is the run's geometric mean."""
    import math
    from kernelseek import results as R
    from kernelseek.mainjob import committed_runs
    from kernelseek.triage import deficit_summary, group_table, row_table
    rows, meta = R.load(committed_runs(grid="bench26")[-1])
    assert meta["env"]["gpu"] == "NVIDIA H200"
    summ = deficit_summary(rows)
    table = row_table(rows)
    shares = table["share"].dropna()
    assert shares.sum() == pytest.approx(summ["deficit"], rel=1e-9)
    assert math.exp(summ["surplus"] - summ["deficit"]) == pytest.approx(R.summarize(rows)["geomean_speedup"], rel=1e-9)
    g = group_table(rows)
    by_kind = g[g["feature"] == "kind"]
    assert by_kind["deficit"].sum() == pytest.approx(summ["deficit"], rel=1e-9)


def test_compare_names_the_side_that_moved_and_a_host_bound_baseline():
    """A row's speedup moves because the candidate's time moved, or the baseline's; a baseline whose
    host time per call is most of its per-call time is labeled host-bound, with both host times."""
    from kernelseek.triage import compare, format_compare

    def row(name, t, bt, bh):
        return Row(scenario=name, status="passed", time_ms=t, baseline="fa4", baseline_ms=bt,
                     baseline_host_ms=bh, speedup=bt / t)
    before = [row("dec", 0.134, 0.137, 0.111), row("pre", 0.50, 0.45, 0.01), row("base", 0.30, 0.30, 0.02),
              row("same", 1.0, 0.9, 0.01)]
    after = [row("dec", 0.134, 0.151, 0.201), row("pre", 0.45, 0.45, 0.01), row("base", 0.30, 0.25, 0.02),
             row("same", 1.005, 0.9, 0.01)]
    df = compare(before, after, noise=0.03).set_index("scenario")
    assert df.loc["dec", "moved"] == "better" and df.loc["dec", "cause"].startswith("baseline host-bound")
    assert "0.111 -> 0.201 ms/call" in df.loc["dec", "cause"]
    assert df.loc["pre", "moved"] == "better" and df.loc["pre", "cause"] == "candidate"
    assert df.loc["base", "moved"] == "worse" and df.loc["base", "cause"] == "baseline"
    assert df.loc["same", "moved"] == "" and df.loc["same", "cause"] == ""
    text = format_compare(compare(before, after, noise=0.03))
    assert "[baseline host-bound (fa4: host 0.111 -> 0.201 ms/call" in text and "[candidate]" in text


V10 = [Path(__file__).resolve().parents[2] / "data" / "runs" / f"h200-bench26-20261130-{t}-fa3_hopper-v10"
       for t in ("103933", "104252", "104338")]


def test_repeatability_on_three_committed_h200_runs():
    """Issue 3's criterion on three consecutive bench26 runs of v10 (committed, append-only): which
    rows moved more than 3% between consecutive runs, and that the baseline, not our kernel, moved
    them."""
    from kernelseek import results as R
    from kernelseek.triage import format_repeatability, repeatability
    df = repeatability([(p.name, R.load(p)[0]) for p in V10])
    assert list(df["over_tol"]) == [5, 2] and list(df["rows"]) == [26, 26]
    first = dict((n, (m, c)) for n, m, c in df.iloc[0]["moved"])
    assert sorted(first) == ["r04_prefill_d128_s512_causal", "r17_prefill_d192_s4k_causal",
                             "r18_varlen_d128_gqa_causal", "r20_decode_paged_b16_kv8k",
                             "r22_decode_paged_b128_kv1k"]
    assert first["r20_decode_paged_b16_kv8k"][0] == pytest.approx(-0.210, abs=0.001)
    assert first["r20_decode_paged_b16_kv8k"][1].startswith("baseline host-bound (fa4: host 0.232 -> 0.150")
    assert first["r04_prefill_d128_s512_causal"][1].startswith("baseline host-bound (cudnn")
    assert df.iloc[0]["own_time_max_move"] < 0.03 < df.iloc[0]["max_move"]
    second = [n for n, _, _ in df.iloc[1]["moved"]]
    assert second == ["r04_prefill_d128_s512_causal", "r20_decode_paged_b16_kv8k"]
    text = format_repeatability(df)
    assert "5 of 26 rows over 3%" in text and "2 of 26 rows over 3%" in text
    # on each side's p10 time most of the movement is gone (it was in the baselines' upper tail)
    assert list(df["p10_over_tol"]) == [3, 1]
    # a move counts the same either way (|log|, compare's rule): the p10 speedup fell by 16.0%, i.e. 19.0%
    assert df.iloc[0]["p10_max_move"] == pytest.approx(1 / 0.840 - 1, abs=0.002)
    assert "on p10 times (each side's fastest batches): 3 rows over 3%, largest move 19.0%" in text



def test_triage_cli_repeat(capsys, tmp_path):
    assert main(["triage", str(V10[0]), "--repeat", str(V10[1]), str(V10[2])]) == 0
    out = capsys.readouterr().out
    assert "== repeatability (consecutive runs)" in out and "5 of 26 rows over 3%" in out
    assert main(["triage", str(V10[0]), "--repeat", str(tmp_path / "missing")]) == 2


def test_repeatability_within_tolerance_and_a_candidate_that_moved():
    from kernelseek.triage import format_repeatability, repeatability

    def row(name, t, bt):
        return Row(scenario=name, status="passed", time_ms=t, baseline="cudnn", baseline_ms=bt,
                   baseline_host_ms=0.01, speedup=bt / t)
    a = [row("x", 1.00, 0.90), row("y", 0.50, 0.50)]
    b = [row("x", 1.02, 0.90), row("y", 0.50, 0.50)]        # x: -2%, within 3%
    c = [row("x", 1.10, 0.90), row("y", 0.50, 0.50)]        # x: our time +7.8%
    df = repeatability([("a", a), ("b", b), ("c", c)])
    assert list(df["over_tol"]) == [0, 1]
    assert df.iloc[1]["moved"] == [("x", pytest.approx(1.02 / 1.10 - 1), "candidate")]
    assert df.iloc[1]["own_time_max_move"] == pytest.approx(1.10 / 1.02 - 1)
    assert "every row within 3%" in format_repeatability(df).splitlines()[0]


def test_p10_speedup_tells_a_tail_move_from_a_floor_move():
    from kernelseek.triage import format_repeatability, p10_speedups, repeatability

    def row(name, bt, bp10):  # our time 1.0 ms (p10 0.9); the baseline's median and p10 as given
        return Row(scenario=name, status="passed", time_ms=1.0, time_p10_ms=0.9, baseline="fa4",
                   baseline_ms=bt, speedup=bt, baselines={"fa4": {"time_ms": bt, "time_p10_ms": bp10}})
    a = [row("tail", 1.0, 0.8), row("floor", 1.0, 0.8)]
    b = [row("tail", 1.2, 0.8), row("floor", 1.2, 0.96)]   # both medians +20%; only "floor"'s p10 moved
    assert p10_speedups(b) == {"tail": pytest.approx(0.8 / 0.9), "floor": pytest.approx(0.96 / 0.9)}
    df = repeatability([("a", a), ("b", b)])
    assert df.iloc[0]["over_tol"] == 2 and df.iloc[0]["p10_over_tol"] == 1
    assert df.iloc[0]["p10_max_move"] == pytest.approx(0.2)
    assert "1 row over 3%" in format_repeatability(df)
    no_p10 = [Row(scenario="x", status="passed", time_ms=1.0, baseline="fa4", baseline_ms=1.0, speedup=1.0)]
    df = repeatability([("a", no_p10), ("b", no_p10)])
    assert df.iloc[0]["p10_over_tol"] is None and "p10" not in format_repeatability(df)


def test_repeat_plot_shades_the_rows_that_moved(tmp_path):
    from kernelseek import results as R
    from kernelseek.repeat_figure import repeat_plot
    fig = repeat_plot([(p.name, R.load(p)[0]) for p in V10])
    assert len(fig.axes) == 1                                 # v10's runs timed no graph replay
    ax = fig.axes[0]
    shaded = [pt for pt in ax.patches if pt.get_alpha() == pytest.approx(0.18)]
    assert len(shaded) == 5                                   # rows 4, 17, 18, 20, 22
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    # every run by its full name (not cut), then the range line, both shadings and parity
    assert legend[:3] == [f"run {i + 1}: {p.name}" for i, p in enumerate(V10)]
    assert any("only the baseline" in t for t in legend) and any("our time moved" in t for t in legend)
    assert fig.axes[0].get_xticklabels()[3].get_text() == "4 prefill_d128_s512_causal"     # rows named
    fig.savefig(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 10_000


def test_repeat_plot_adds_the_graph_measure_when_the_runs_timed_it(tmp_path):
    """Session 12's bench26 pair (graph rounds): a second panel of graph speedups, with only row 20
    shaded there (3.4%, FA3's time moved, ours did not), while per call rows 3, 7 and 12 are."""
    import matplotlib.colors
    from kernelseek import plots
    from kernelseek import results as R
    from kernelseek.repeat_figure import repeat_plot
    runs = sorted((Path(__file__).resolve().parents[2] / "data" / "runs").glob("h200-bench26-20261202-00*-fa3_hopper-v13rounds"))
    assert len(runs) == 2
    fig = repeat_plot([(p.name, R.load(p)[0]) for p in runs])
    call, graph = fig.axes
    def shaded(ax):
        return sorted(round((pt.get_x() + pt.get_width() / 2)) + 1 for pt in ax.patches
                      if pt.get_alpha() == pytest.approx(0.18))
    assert shaded(call) == [3, 7, 12] and shaded(graph) == [20]
    colours = {pt.get_facecolor()[:3] for pt in graph.patches if pt.get_alpha() == pytest.approx(0.18)}
    assert colours == {matplotlib.colors.to_rgb(plots.BELOW)}             # only the baseline moved
    assert "graph" in graph.get_ylabel() and graph.get_xticklabels()[19].get_text().startswith("20 decode")
    fig.savefig(tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 10_000


def test_history_of_the_committed_fa3_versions(tmp_path):
    """The version history of kernels/fa3_hopper.cu from the committed H200 runs: versions in the order
    they ran, variants (kernel switches set in KSEEK_*) left out, medians over each version's runs;
    asked by the name of the folder it was split into (kernels/fa3_hopper), the same history."""
    import shutil
    from kernelseek.mainjob import committed_runs
    runs = committed_runs(grid="bench26")
    df = triage.history(runs, kernel="kernels/fa3_hopper.cu")
    vs = list(df["version"])
    # v12peers: v12's kernel (the folder) timed against FA3, FlashInfer, cuDNN, FA2 (session 8);
    # v13peers: v13's against those and FA4 (session 11; its runs set KSEEK_BUNDLED, a harness setting);
    # v13rounds: the same kernel, graph times over alternating replay rounds (session 12, --graph-rounds 4);
    # v15peers: kernel v15 against every peer, rounds too (session 15; the 3-row warm-up is not a version);
    # v16a, v16b, v16: the three states of kernel v16 (ABI 3's attention_chunk) against FA3 (session 16);
    # v23c: kernel v23 (packed-query O by TMA store, varlen on the dynamic kernels) against FA3 (session 23)
    assert vs[0] == "v2" and vs[-10:] == ["v10", "v12", "v12peers", "v13peers", "v13rounds", "v15peers",
                                          "v16a", "v16b", "v16", "v23c"]
    assert len(set(vs)) == len(vs)
    assert list(triage.history(runs, kernel="kernels/fa3_hopper")["version"]) == vs
    assert df.attrs["variants_left_out"] == 2       # v3var2 (KSEEK_FA3_VARIANT), v4section (KSEEK_FA3_ORDER)
    v12 = [p for p in runs if p.name.endswith("fa3_hopper-v12")]
    gms = sorted(results.summarize(results.load(p)[0])["geomean_speedup"] for p in v12)
    row = df.set_index("version").loc["v12"]
    assert row["runs"] == len(v12) == 4
    assert row["geomean"] == pytest.approx((gms[1] + gms[2]) / 2)
    assert row["geomean"] > df.set_index("version").loc["v10", "geomean"]
    # one run: each group's value is the geomean of its rows (hd64 prefill = rows 1-3)
    one = triage.history([v12[0]])
    rows = results.load(v12[0])[0]
    want = results.geomean([r.speedup for r in rows if r.scenario[:3] in ("r01", "r02", "r03")])
    assert one.loc[0, "prefill d64"] == pytest.approx(want)
    assert one.loc[0, "worst"] == pytest.approx(min(r.speedup for r in rows))
    # a run directory without the <kernel>-<tag> name is labeled by its source hash
    shutil.copytree(v12[0], tmp_path / "run1")
    meta = results.load(tmp_path / "run1")[1]
    assert triage.history([tmp_path / "run1"]).loc[0, "version"] == meta["kernel_sha256"][:8]
    text = triage.format_history(df)
    assert text.splitlines()[0].split()[:5] == ["version", "runs", "geomean", "kernel", "worst"]
    assert "(2 variant run(s)" in text


def test_history_joins_the_file_and_its_folder_and_leaves_define_variants_out(tmp_path):
    """Runs of kernels/fa3_hopper.cu (committed, before the split) and of the folder kernels/fa3_hopper
    are one kernel's history, whichever of the two names is asked for; a run built with defines
    (meta build_defines) is a variant, left out and counted like the old KSEEK_* switch runs."""
    import json
    import shutil
    from kernelseek.mainjob import committed_runs, repeat_group
    runs = committed_runs(grid="bench26")
    old = triage.history(runs, kernel="kernels/fa3_hopper.cu")
    v12 = [p for p in runs if p.name.endswith("fa3_hopper-v12")]

    def copy(src, name, **meta):
        d = tmp_path / name
        shutil.copytree(src, d)
        doc = store.read_results(d)          # (a committed run: results.json.gz)
        doc["meta"].update(meta)
        (d / "results.json").write_text(json.dumps(doc))
        return d
    folder = "kernels/fa3_hopper"
    split = copy(v12[-1], "h200-bench26-20270101-000000-fa3_hopper-v13", kernel=folder)
    variant = copy(v12[-1], "h200-bench26-20270101-000100-fa3_hopper-v13bn", kernel=folder + "/",
                   build_defines={"KSEEK_FA3_BN": "64"})
    for kernel in (folder, "kernels/fa3_hopper.cu", "kernels/fa3_hopper/fa3_hopper.cu"):
        df = triage.history(runs + [split, variant], kernel=kernel)
        assert list(df["version"]) == list(old["version"]) + ["v13"]
        assert df.attrs["variants_left_out"] == old.attrs["variants_left_out"] + 1
    df = triage.history(runs + [split, variant])          # default: the last run's kernel (the folder)
    assert list(df["version"])[-1] == "v13" and len(df) == len(old) + 1
    assert "left out: build defines, or kernel switches in KSEEK_*" in triage.format_history(df)
    assert triage.is_variant({"build_defines": {"X": "1"}}) and triage.is_variant({"kseek_env": {"KSEEK_FA3_BN": "64"}})
    assert not triage.is_variant({"build_defines": {}, "kseek_env": {"KSEEK_GIT_REV": "abc", "KSEEK_CACHE_DIR": "/c"}})
    # a baseline's loading switch (the peers runs set KSEEK_FLASHINFER_JIT=0) is not a kernel variant
    assert not triage.is_variant({"kseek_env": {"KSEEK_FLASHINFER_JIT": "0", "KSEEK_FA3_LIB": "/x.so"}})
    assert triage.is_variant({"kseek_env": {"KSEEK_FLASHINFER_JIT": "0", "KSEEK_FA3_ORDER": "flat"}})
    # a variant is not a repeat of the plain build, even of the same source and revision
    twin = copy(split, "h200-bench26-20270101-000200-fa3_hopper-v13", build_defines={"KSEEK_FA3_BN": "64"})
    assert repeat_group([split, twin], split) == [split]


def test_history_plot_clips_and_labels_early_versions(tmp_path):
    from kernelseek.mainjob import committed_runs
    from kernelseek.plots import history_plot
    df = triage.history(committed_runs(grid="bench26"), kernel="kernels/fa3_hopper.cu")
    fig = history_plot(df)
    ax = fig.axes[0]
    groups = [c for c in df.columns if c.startswith(("prefill", "decode"))]
    # groups, all rows, worst row, parity line, the down arrows of the clipped versions
    assert len(ax.get_lines()) == len(groups) + 4
    assert ax.get_ylim()[0] == pytest.approx(0.5)          # v2's decode rows (0.13x) would squash the rest
    arrows = ax.get_lines()[-1]
    assert list(arrows.get_xdata()) == [0, 1]              # v2 and v3var1 have values off the axis
    v2 = df.iloc[0]
    note = ax.get_xlabel().splitlines()[-1]                # the arrows' values, printed under the plot
    assert note.startswith("\u2193 values below 0.5") and f"v2: worst row {v2['worst']:.2f}" in note
    assert any("off the axis" in t.get_text() for t in ax.get_legend().get_texts())
    assert all("\u00d7" not in t.get_text() for t in ax.get_yticklabels())    # plain numbers, no 2x10^0
    fig.savefig(tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 10_000
