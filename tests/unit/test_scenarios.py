"""Scenarios and grids: the shipped grids load, every validation error names file, scenario and
field, FLOP and byte counts match hand computations, select() and the `grid` verb work.

Expected counts below are worked out by hand from the mask rules in kernels/kseek.h (bottom-right
aligned; key j' visible iff i + Sk - Sq - left <= j' <= i + Sk - Sq + right), never by calling the
code under test.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kernelseek.scenarios import GRID_DIR, GridError, Scenario, load_grid, select  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "grids"


def write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def grid_error(path) -> str:
    with pytest.raises(GridError) as ei:
        load_grid(path)
    return str(ei.value)


def assert_names(msg: str, *parts: str) -> None:
    for part in parts:
        assert part in msg, f"{part!r} not in error message {msg!r}"


# ---- the shipped grids ---------------------------------------------------------------------------
def test_builtin_grids_are_the_four_expected():
    assert {p.stem for p in GRID_DIR.glob("*.yaml")} >= {"bench26", "optest", "hopper", "smoke"}


@pytest.mark.parametrize("name,minimum", [("bench26", 26), ("optest", 58), ("hopper", 182), ("smoke", 5), ("varlen", 8)])
def test_shipped_grid_loads_with_unique_names(name, minimum):
    grid = load_grid(name)
    assert len(grid) >= minimum
    names = [s.name for s in grid]
    assert len(set(names)) == len(names)
    for s in grid:
        assert isinstance(s, Scenario)
        full = sum(q * max(0, k1 - k0) for q, (k0, k1) in zip(s.q_lens(), s.k_ranges()))
        assert 0 <= s.attended() <= full
        assert s.min_bytes() > 0
        assert s.group in ("prefill", "decode")
        s.short()


def test_grid_loads_by_path_too():
    by_name = load_grid("smoke")
    by_path = load_grid(GRID_DIR / "smoke.yaml")
    assert by_name == by_path


def test_bench26_has_exactly_rows_1_to_26():
    grid = load_grid("bench26")
    assert len(grid) == 26
    assert [s.row for s in grid] == list(range(1, 27))
    assert all(s.dtype == "bf16" for s in grid)
    assert [s.row for s in grid if s.group == "decode"] == [20, 21, 22, 23, 24]


def test_bench26_row9_flops_match_flashattention_formula():
    r9 = select(load_grid("bench26"), "9")[0]
    B, S, H, D = 1, 16384, 16, 128
    assert (r9.batch, r9.seqlen_q, r9.heads_q, r9.head_dim, r9.causal) == (B, S, H, D, True)
    fa = 4 * B * S * S * H * D / 2          # FlashAttention's benchmark: causal halves 4*B*S^2*H*D
    assert abs(r9.flops() - fa) / fa < 1e-4
    # and exactly: every row i attends i+1 keys, so S(S+1)/2 per head
    assert r9.flops() == 2 * H * (S * (S + 1) // 2) * (D + D)


def test_bench26_noncausal_rows_are_exactly_4BSSHD():
    for s in select(load_grid("bench26"), "10-12"):
        assert not s.causal
        assert s.flops() == 4 * s.batch * s.seqlen_q * s.seqlen_k * s.heads_q * s.head_dim


def test_bench26_decode_bytes_are_the_kv_cache():
    r20 = select(load_grid("bench26"), "20")[0]
    # B16, 8192 keys, 8 KV heads, D 128, bf16: K and V once
    kv = 16 * 8192 * 8 * (128 + 128) * 2
    assert r20.kv_bytes() == kv
    q = 16 * 1 * 32 * 128 * 2
    o = 16 * 1 * 32 * 128 * 2 + 16 * 1 * 32 * 4
    assert r20.min_bytes() == kv + q + o


# ---- optest: the FlashAttention-3 test grid port ---------------------------------------------------
@pytest.fixture(scope="module")
def optest():
    return load_grid("optest")


def test_optest_covers_fa3_options(optest):
    assert {s.head_dim for s in optest} == {64, 96, 128, 192, 256}
    assert any(s.head_dim == 192 and s.dv == 128 for s in optest)
    assert {s.attn_type for s in optest} == {"MHA", "GQA", "MQA"}
    assert {s.dtype for s in optest} == {"bf16", "fp16", "fp8"}
    assert len({s.head_dim for s in optest if s.dtype == "fp8"}) >= 3
    assert {s.page_size for s in optest if s.paged} == {1, 4, 16, 128}
    assert {1, 3} <= {s.num_splits for s in optest}
    assert any(s.causal for s in optest) and any(s.softcap > 0 for s in optest) and any(s.sinks for s in optest)
    windows = {s.window for s in optest}
    assert {(16, 16), (128, 0), (0, 0)} <= windows


def test_optest_has_fa3_lengths(optest):
    dense = {(s.seqlen_q, s.seqlen_k) for s in optest if not s.varlen and not s.paged and s.cache_seqlens is None}
    for pair in [(1, 1), (239, 1), (799, 3), (113, 203), (128, 217), (1023, 1024), (1024, 1023), (4224, 4224)]:
        assert pair in dense, pair
    # causal with more queries than keys: some rows have no key at all
    assert any(s.causal and s.seqlen_q > s.seqlen_k for s in optest if not s.varlen)


def test_optest_varlen_caches_and_leftpad(optest):
    varlen = [s for s in optest if s.varlen]
    assert any(all(q == 1 for q in s.seqlens_q) for s in varlen)                   # all single-token
    assert any(1 in s.seqlens_q and max(s.seqlens_q) > 1 for s in varlen)          # mixed
    caches = [s for s in optest if s.cache_seqlens is not None]
    assert any(max(cap - c for cap, c in zip(s.k_capacity(), s.cache_seqlens)) > 0 for s in caches)
    lp = [s for s in optest if s.leftpad is not None]
    assert lp and all(s.cache_seqlens is not None for s in lp)
    assert any(s.paged and s.leftpad is not None for s in optest)
    # a capacity that is not a multiple of its page size
    assert any(s.paged and s.seqlen_k % s.page_size for s in optest)


def test_optest_stays_cheap(optest):
    # the naive kernel and an fp32 reference must finish each scenario in seconds
    for s in optest:
        assert s.flops() <= 40e9, s.name
        score_elems = s.heads_q * sum(q * (k1 - k0) for q, (k0, k1) in zip(s.q_lens(), s.k_ranges()))
        assert score_elems <= 200e6, s.name
    big = [s for s in optest if not s.varlen and s.seqlen_q == 4224]
    assert big and all(s.batch == 1 and 2 <= s.heads_q <= 4 for s in big)


# ---- hopper: the rule-built grid --------------------------------------------------------------------
@pytest.fixture(scope="module")
def hopper():
    return load_grid("hopper")


def test_hopper_is_generated_by_a_rule(hopper):
    text = (GRID_DIR / "hopper.yaml").read_text()
    assert "generate:" in text and "FROZEN" in text
    assert "scenarios:" not in text                # every scenario comes from the rule
    layouts = {"dense": 54, "varlen": 54, "paged": 54, "decode": 48}
    for layout, n in layouts.items():
        assert sum(s.name.startswith(layout + "_") for s in hopper) == n, layout
    assert len(hopper) == sum(layouts.values())


def test_hopper_axes_are_full_cross_products(hopper):
    for layout in ("dense", "varlen", "paged"):
        ss = [s for s in hopper if s.name.startswith(layout + "_")]
        combos = {(s.head_dim, s.dv, s.dtype, s.causal, s.window) for s in ss}
        assert len(combos) == 6 * 3 * 3, layout
        assert {s.head_dim for s in ss} == {64, 96, 128, 192, 256}
        assert all(s.varlen == (layout == "varlen") for s in ss)
        assert all(s.paged == (layout == "paged") for s in ss)
    decode = [s for s in hopper if s.name.startswith("decode_")]
    assert all(s.group == "decode" and s.cache_seqlens is not None for s in decode)
    assert {(s.head_dim, s.dtype, s.page_size, s.seqlen_q) for s in decode} == {
        (d, t, p, q) for d in (64, 128, 192, 256) for t in ("bf16", "fp8") for p in (16, 128, 0) for q in (1, 4)}


def test_hopper_names_spell_out_the_point(hopper):
    for s in hopper:
        label = f"d{s.head_dim}" + (f"v{s.dv}" if s.dv != s.head_dim else "")
        assert f"_{label}_{s.dtype}_" in s.name, s.name
        assert ("cap" in s.name) == (s.softcap > 0), s.name
        assert ("sinks" in s.name) == s.sinks, s.name
        assert s.attn_type.lower() in s.name or (s.attn_type == "GQA" and "_gqa" in s.name), s.name


def test_hopper_rotated_features_meet_every_axis_value(hopper):
    for layout in ("dense", "varlen", "paged", "decode"):
        ss = [s for s in hopper if s.name.startswith(layout + "_")]
        for ax in ("head_dim", "dtype", "causal", "page_size"):
            values = {getattr(s, ax) for s in ss}
            for feat in ("softcap", "sinks"):
                assert {getattr(s, ax) for s in ss if s.features()[feat]} == values, (layout, feat, ax)
            for v in values:
                assert {s.attn_type for s in ss if getattr(s, ax) == v} == {"MHA", "GQA", "MQA"}, (layout, ax, v)


def test_hopper_leftpad_only_with_cache_seqlens_and_moderate_lengths(hopper):
    assert any(s.leftpad is not None for s in hopper)
    for s in hopper:
        if s.leftpad is not None:
            assert s.cache_seqlens is not None
        assert max(s.k_capacity()) <= 4096 and max(s.q_lens()) <= 2048
    assert sum(s.flops() for s in hopper) < 2e12
    assert {1, 3} <= {s.num_splits for s in hopper}


# ---- validation: every error names file, scenario and field ------------------------------------------
@pytest.mark.parametrize("fixture,scenario,field", [
    ("unknown_field.yaml", "typo_field", "head_size"),
    ("wrong_type.yaml", "string_heads", "heads_q"),
    ("heads_not_multiple.yaml", "gqa_6_over_4", "heads_kv"),
    ("bad_dtype.yaml", "fp32_inputs", "dtype"),
    ("cache_seqlens_length.yaml", "short_cache_list", "cache_seqlens"),
    ("leftpad_beyond_cache.yaml", "leftpad_past_end", "leftpad"),
    ("duplicate_name.yaml", "twice", "name"),
    ("missing_field.yaml", "no_kv_heads", "heads_kv"),
    ("bad_template.yaml", "#0", "name"),
    ("bad_generated.yaml", "gen_128_gqa", "heads_kv"),
])
def test_fixture_errors_name_file_scenario_field(fixture, scenario, field):
    msg = grid_error(FIXTURES / fixture)
    assert_names(msg, fixture, f"'{field}'", scenario)


def test_specific_error_wording():
    assert "must be an integer" in grid_error(FIXTURES / "wrong_type.yaml")
    assert "not a multiple" in grid_error(FIXTURES / "heads_not_multiple.yaml")
    assert "needs 3 entries, got 2" in grid_error(FIXTURES / "cache_seqlens_length.yaml")
    assert "duplicate" in grid_error(FIXTURES / "duplicate_name.yaml")
    assert "'mask'" in grid_error(FIXTURES / "bad_template.yaml")
    assert "generate[0]" in grid_error(FIXTURES / "bad_template.yaml")


def test_invalid_yaml_and_empty_grid_name_the_file():
    msg = grid_error(FIXTURES / "invalid_yaml.yaml")
    assert_names(msg, "invalid_yaml.yaml", "not valid YAML")
    msg = grid_error(FIXTURES / "empty.yaml")
    assert_names(msg, "empty.yaml", "no scenarios")


def test_unknown_grid_name_lists_builtin_grids():
    msg = grid_error("no_such_grid")
    assert_names(msg, "no_such_grid", "bench26", "hopper", "optest", "smoke")


BASE = "batch: 1, seqlen_q: 16, seqlen_k: 16, heads_q: 4, heads_kv: 2, head_dim: 64"


@pytest.mark.parametrize("extra,field", [
    ("causal: 1", "causal"),                       # an int, not a boolean
    ("window: [16]", "window"),
    ("window: [-2, 0]", "window"),
    ("softcap: fast", "softcap"),
    ("softcap: -1.0", "softcap"),
    ("seqlens_k: [16]", "seqlens_k"),              # without seqlens_q
    ("page_size: -16", "page_size"),
    ("num_splits: -1", "num_splits"),
    ("kind: training", "kind"),
    ("head_dim_v: -8", "head_dim_v"),
    ("head_dim_v: 100", "head_dim"),               # not a multiple of 8
    ("leftpad: [1, 2]", "leftpad"),                # batch is 1
    ("cache_seqlens: [17]", "cache_seqlens"),      # beyond capacity 16
    ("row: 0", "row"),
])
def test_inline_field_errors(tmp_path, extra, field):
    p = write(tmp_path, f"scenarios:\n- {{name: the_one, {BASE}, {extra}}}\n", "inline.yaml")
    assert_names(grid_error(p), "inline.yaml", "the_one", f"'{field}'")


def test_head_dim_and_seqlen_errors(tmp_path):
    p = write(tmp_path, "scenarios:\n- {name: hd, batch: 1, seqlen_q: 16, seqlen_k: 16, heads_q: 2, heads_kv: 2, head_dim: 512}\n")
    assert_names(grid_error(p), "g.yaml", "hd", "'head_dim'")
    p = write(tmp_path, "scenarios:\n- {name: noq, batch: 1, seqlen_k: 16, heads_q: 2, heads_kv: 2, head_dim: 64}\n")
    assert_names(grid_error(p), "noq", "'seqlen_q'")
    p = write(tmp_path, "scenarios:\n- {name: vl, seqlens_q: [4, 4], seqlens_k: [4], heads_q: 2, heads_kv: 2, head_dim: 64}\n")
    assert_names(grid_error(p), "vl", "'seqlens_k'")
    p = write(tmp_path, "scenarios:\n- {name: vl0, seqlens_q: [], seqlens_k: [], heads_q: 2, heads_kv: 2, head_dim: 64}\n")
    assert_names(grid_error(p), "vl0", "'seqlens_q'")
    p = write(tmp_path, "scenarios:\n- {name: vlp, seqlens_q: [4], seqlens_k: [8], page_size: 4, heads_q: 2, heads_kv: 2, head_dim: 64}\n")
    assert_names(grid_error(p), "vlp", "'page_size'")


def test_defaults_errors_name_the_scenario(tmp_path):
    # a bad default is reported against the scenario that inherits it
    p = write(tmp_path, "defaults: {dtype: int8, heads_q: 2, heads_kv: 2, head_dim: 64}\n"
                        "scenarios:\n- {name: inherits, batch: 1, seqlen_q: 4, seqlen_k: 4}\n")
    assert_names(grid_error(p), "g.yaml", "inherits", "'dtype'")
    p = write(tmp_path, "defaults: [1, 2]\nscenarios:\n- {name: x, " + BASE + "}\n")
    assert_names(grid_error(p), "g.yaml", "defaults")


def test_top_level_errors(tmp_path):
    assert_names(grid_error(write(tmp_path, "- just\n- a list\n")), "g.yaml", "top level")
    assert_names(grid_error(write(tmp_path, "scenario: []\n")), "g.yaml", "scenario")
    assert_names(grid_error(write(tmp_path, "grid: x\n")), "g.yaml", "no scenarios")
    assert_names(grid_error(write(tmp_path, "scenarios:\n- 42\n")), "g.yaml", "#0", "mapping")


@pytest.mark.parametrize("gen,needle", [
    ('name: "x_{i}_{head_dim"\n  axes: {head_dim: [64]}', "'name'"),          # unbalanced brace
    ('name: "x_{nope}"\n  axes: {head_dim: [64]}', "'nope'"),                  # unknown label
    ('axes: {head_dim: [64]}', "'name'"),                                     # no template
    ('name: "x_{head_dim}"\n  axes: {}', "axes"),                              # no axes
    ('name: "x_{head_dim}"\n  axes: {head_dim: 64}', "'head_dim'"),           # not a list
    ('name: "x_{head_dim}"\n  axes: {head_dim: [64]}\n  rotate: {causal: []}', "'causal'"),
    ('name: "x_{head_dim}"\n  axes: {head_dim: [64]}\n  axis: {}', "axis"),   # misspelt key
])
def test_bad_generate_blocks(tmp_path, gen, needle):
    text = f"defaults: {{{BASE.replace(', head_dim: 64', '')}}}\ngenerate:\n- {gen}\n"
    msg = grid_error(write(tmp_path, text, "gen.yaml"))
    assert_names(msg, "gen.yaml", "generate[0]", needle)


# ---- generate: expansion semantics -----------------------------------------------------------------
def test_generate_cross_product_rotate_and_labels(tmp_path):
    text = """
defaults: {batch: 1, seqlen_q: 8, seqlen_k: 8}
generate:
- name: "{i}_{layout}_{head_dim}_{dtype}_{heads}"
  base: {causal: true}
  axes:
    head_dim: [64, 128]
    dtype: [bf16, fp8]
    layout: [{label: dense}, {label: paged, page_size: 4, cache_seqlens: [5]}]
  rotate:
    heads: [{label: mha, heads_q: 2, heads_kv: 2}, {label: mqa, heads_q: 4, heads_kv: 1}, {label: gqa, heads_q: 4, heads_kv: 2}]
    softcap: [0.0, 30.0]
"""
    grid = load_grid(write(tmp_path, text))
    assert len(grid) == 8
    # the product runs in the order the axes are written, the last axis fastest
    assert [(s.head_dim, s.dtype, s.paged) for s in grid] == [
        (64, "bf16", False), (64, "bf16", True), (64, "fp8", False), (64, "fp8", True),
        (128, "bf16", False), (128, "bf16", True), (128, "fp8", False), (128, "fp8", True)]
    # rotate: scenario i takes value i % len
    assert [s.heads_kv for s in grid] == [2, 1, 2, 2, 1, 2, 2, 1]
    assert [s.softcap for s in grid] == [0.0, 30.0] * 4
    assert all(s.causal for s in grid)
    assert grid[1].name == "1_paged_64_bf16_mqa" and grid[1].cache_seqlens == (5,)
    assert grid[6].name == "6_dense_128_fp8_mha"


def test_generate_and_scenarios_combine_with_defaults(tmp_path):
    text = """
defaults: {heads_q: 2, heads_kv: 2, head_dim: 64, batch: 1, dtype: fp16}
scenarios:
- {name: hand, seqlen_q: 4, seqlen_k: 4}
generate:
  name: "gen_{seqlen_q}"
  axes: {seqlen_q: [1, 2]}
  base: {seqlen_k: 8}
"""
    grid = load_grid(write(tmp_path, text))
    assert [s.name for s in grid] == ["hand", "gen_1", "gen_2"]
    assert all(s.dtype == "fp16" for s in grid)


def test_generated_name_clashing_with_a_written_one(tmp_path):
    text = """
defaults: {heads_q: 2, heads_kv: 2, head_dim: 64, batch: 1, seqlen_k: 8}
scenarios:
- {name: gen_1, seqlen_q: 4}
generate:
  name: "gen_{seqlen_q}"
  axes: {seqlen_q: [1, 2]}
"""
    assert_names(grid_error(write(tmp_path, text)), "g.yaml", "gen_1", "'name'", "duplicate")


# ---- FLOPs and bytes against hand computation -------------------------------------------------------
def sc(**kw) -> Scenario:
    base = dict(name="t", heads_q=1, heads_kv=1, head_dim=8, batch=1)
    base.update(kw)
    return Scenario(**base)


def test_noncausal_flops():
    s = sc(batch=2, seqlen_q=8, seqlen_k=8, heads_q=3, heads_kv=3, head_dim=16)
    assert s.attended() == 2 * 8 * 8                           # per head: both sequences, full
    assert s.flops() == 2 * 3 * 2 * 8 * 8 * (16 + 16) == 24576


def test_causal_square_flops():
    s = sc(seqlen_q=4, seqlen_k=4, causal=True)
    assert s.attended() == 1 + 2 + 3 + 4 == 10
    assert s.flops() == 2 * 1 * 10 * (8 + 8)
    s2 = sc(batch=3, seqlen_q=4, seqlen_k=4, heads_q=2, heads_kv=1, causal=True)
    assert s2.flops() == 2 * 2 * (3 * 10) * 16


def test_causal_bottom_right_alignment():
    # Sq=2, Sk=5: row 0 sits at key 3 (sees 0..3), row 1 at key 4 (sees 0..4)
    assert sc(seqlen_q=2, seqlen_k=5, causal=True).attended() == 4 + 5
    # Sq>Sk: 5 queries over 2 keys: rows 0..2 see nothing, row 3 sees key 0, row 4 keys 0..1
    assert sc(seqlen_q=5, seqlen_k=2, causal=True).attended() == 0 + 0 + 0 + 1 + 2
    # 239 queries, 1 key: only the last row sees it
    assert sc(seqlen_q=239, seqlen_k=1, causal=True).attended() == 1
    # 1024 x 1023: row i sees i keys
    assert sc(seqlen_q=1024, seqlen_k=1023, causal=True).attended() == 1023 * 1024 // 2


def test_window_counts():
    # (1, 0), Sq=Sk=4: row i sees keys i-1..i
    assert sc(seqlen_q=4, seqlen_k=4, window=(1, 0)).attended() == 1 + 2 + 2 + 2
    # causal with window (1, -1) is the same mask
    assert sc(seqlen_q=4, seqlen_k=4, causal=True, window=(1, -1)).attended() == 7
    # (0, 0): the diagonal only
    assert sc(seqlen_q=4, seqlen_k=4, window=(0, 0)).attended() == 4
    # (-1, 1): everything up to one key ahead: rows see 2, 3, 4, 4
    assert sc(seqlen_q=4, seqlen_k=4, window=(-1, 1)).attended() == 13
    # causal caps a positive right window at 0
    assert sc(seqlen_q=4, seqlen_k=4, causal=True, window=(-1, 2)).attended() == 10
    # (2, 1) on Sq=3, Sk=6: diagonals at 3, 4, 5 -> keys 1..4, 2..5, 3..5
    assert sc(seqlen_q=3, seqlen_k=6, window=(2, 1)).attended() == 4 + 4 + 3
    # a window that misses every key: Sq=4 Sk=1, window (0, 0): only row 3 (diag 0) sees key 0
    assert sc(seqlen_q=4, seqlen_k=1, window=(0, 0)).attended() == 1


def test_varlen_sums():
    s = sc(seqlens_q=(3, 1), seqlens_k=(5, 2), heads_q=2, heads_kv=1, head_dim=16, head_dim_v=8)
    assert s.attended() == 3 * 5 + 1 * 2 == 17
    assert s.flops() == 2 * 2 * 17 * (16 + 8)
    c = sc(seqlens_q=(3, 1, 2), seqlens_k=(5, 2, 0), causal=True)
    # seq 0: rows at keys 2, 3, 4 -> 3+4+5; seq 1: 2; seq 2: no keys
    assert c.attended() == 12 + 2 + 0
    # bytes: Q and O per query row, K/V per key row, bf16 in, bf16 out, fp32 LSE
    # (seq 2's two query rows see no key: they need not be read, only written)
    rows_q, rows_k, read_q = 3 + 1 + 2, 5 + 2 + 0, 3 + 1
    assert c.min_bytes() == read_q * 8 * 2 + rows_k * (8 + 8) * 2 + rows_q * 8 * 2 + rows_q * 4


def test_cache_seqlens_and_leftpad_count_only_valid_keys():
    # decode: keys [8, 40) and [0, 10) of a 64-key paged cache
    s = sc(batch=2, seqlen_q=1, seqlen_k=64, heads_q=4, heads_kv=2, head_dim=64,
           page_size=16, cache_seqlens=(40, 10), leftpad=(8, 0))
    assert s.attended() == 32 + 10
    q = 2 * 1 * 4 * 64 * 2
    kv = (32 + 10) * 2 * (64 + 64) * 2
    o = 2 * 1 * 4 * 64 * 2 + 2 * 1 * 4 * 4
    assert s.min_bytes() == q + kv + o == 23584
    assert s.kv_bytes() == kv
    assert s.flops() == 2 * 4 * 42 * 128
    # 4 causal queries over keys [3, 10): Sk_b = 7, rows sit at 3..6 -> 4+5+6+7
    c = sc(batch=1, seqlen_q=4, seqlen_k=16, cache_seqlens=(10,), leftpad=(3,), causal=True)
    assert c.attended() == 22
    # leftpad without cache_seqlens ends at capacity
    assert sc(batch=1, seqlen_q=1, seqlen_k=16, leftpad=(6,)).attended() == 10
    # an empty cache and a cache fully left-padded
    assert sc(batch=2, seqlen_q=1, seqlen_k=16, cache_seqlens=(0, 5), leftpad=(0, 5)).attended() == 0


def test_fp8_and_dv_byte_sizes():
    f8 = sc(seqlen_q=8, seqlen_k=8, heads_q=4, heads_kv=2, head_dim=64, dtype="fp8")
    q, kv = 8 * 4 * 64 * 1, 8 * 2 * (64 + 64) * 1         # one byte per element
    o = 8 * 4 * 64 * 2 + 8 * 4 * 4                         # output bf16, LSE fp32
    descales = 3 * 1 * 2 * 4                               # q/k/v descale per (batch, KV head)
    assert f8.min_bytes() == q + kv + o + descales == 8344
    assert f8.kv_bytes() == kv
    b16 = sc(seqlen_q=8, seqlen_k=8, heads_q=4, heads_kv=2, head_dim=64, dtype="bf16")
    assert b16.min_bytes() == 2 * q + 2 * kv + o == 12416
    # D=192, Dv=128
    dv = sc(seqlen_q=2, seqlen_k=3, heads_q=2, heads_kv=1, head_dim=192, head_dim_v=128)
    assert dv.dv == 128
    assert dv.flops() == 2 * 2 * (2 * 3) * (192 + 128)
    assert dv.min_bytes() == 2 * 2 * 192 * 2 + 3 * 1 * (192 + 128) * 2 + 2 * 2 * 128 * 2 + 2 * 2 * 4


def test_derived_fields():
    assert math.isclose(sc(seqlen_q=1, seqlen_k=1, head_dim=64).softmax_scale, 0.125)
    assert sc(seqlen_q=1, seqlen_k=1, scale=0.5).softmax_scale == 0.5
    assert sc(seqlen_q=1, seqlen_k=100).group == "decode"
    assert sc(seqlen_q=17, seqlen_k=100).group == "prefill"
    assert sc(seqlen_q=1, seqlen_k=100, kind="prefill").group == "prefill"
    assert sc(heads_q=8, heads_kv=1, seqlen_q=1, seqlen_k=1).attn_type == "MQA"
    assert sc(heads_q=8, heads_kv=2, seqlen_q=1, seqlen_k=1).attn_type == "GQA"
    assert sc(causal=True, seqlen_q=1, seqlen_k=1).effective_window == (-1, 0)
    d = sc(seqlens_q=(1, 2), seqlens_k=(3, 4)).to_dict()
    assert d["seqlens_q"] == [1, 2] and json.dumps(d)


# ---- select ---------------------------------------------------------------------------------------------
def test_select_rows_ranges_names():
    grid = load_grid("bench26")
    assert [s.row for s in select(grid, "9")] == [9]
    assert [s.row for s in select(grid, "20-24")] == [20, 21, 22, 23, 24]
    assert [s.row for s in select(grid, "26, 3, 1-2")] == [1, 2, 3, 26]        # file order
    assert [s.row for s in select(grid, "1-3,2")] == [1, 2, 3]                 # no duplicates
    assert [s.name for s in select(grid, "r25_prefill_d128_gqa4_s4k_win1024")] == ["r25_prefill_d128_gqa4_s4k_win1024"]
    assert [s.row for s in select(grid, "decode_paged")] == [20, 21, 22, 23, 24]   # substring
    assert [s.row for s in select(grid, "d256")] == [13, 14, 15, 26]
    assert select(grid, None) == grid and select(grid, "") == grid
    assert [s.row for s in select(grid, "9,")] == [9]                          # trailing comma
    with pytest.raises(GridError, match="matches no scenario"):
        select(grid, "nothing_like_this")
    with pytest.raises(GridError):
        select(grid, "27-30")


def test_select_exact_name_beats_substring():
    smoke = load_grid("smoke")
    # 'dense_causal' is a full name; it must not also pull in names that merely contain it
    assert [s.name for s in select(smoke, "dense_causal")] == ["dense_causal"]
    assert {s.name for s in select(smoke, "dense")} == {"dense_causal", "dense_noncausal_awkward"}


# ---- the `grid` verb ----------------------------------------------------------------------------------
def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "kernelseek", "grid", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_lists_smoke():
    r = run_cli("smoke")
    assert r.returncode == 0, r.stderr
    smoke = load_grid("smoke")
    lines = r.stdout.splitlines()
    for s in smoke:
        line = next(ln for ln in lines if f" {s.name} " in ln)
        assert s.short() in line and s.group in line
        assert f"{s.flops() / 1e9:.3f}" in line and f"{s.min_bytes() / 1e6:.3f}" in line
    assert f"{len(smoke)} scenario(s)" in lines[-1]
    assert "GFLOP" in lines[0] and "MB" in lines[0]


def test_cli_json_and_pattern():
    r = run_cli("bench26", "--scenarios", "9,20-21", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["row"] for x in rows] == [9, 20, 21]
    B, S, H, D = 1, 16384, 16, 128
    assert abs(rows[0]["gflop"] * 1e9 - 2 * H * S * (S + 1) // 2 * 2 * D) < 1e3
    assert rows[1]["group"] == "decode" and rows[1]["name"] == "r20_decode_paged_b16_kv8k"
    assert rows[1]["min_mb"] == pytest.approx((16 * 8192 * 8 * 256 * 2 + 16 * 32 * 128 * 2 * 2 + 16 * 32 * 4) / 1e6)
    assert rows[1]["scenario"]["page_size"] == 16


def test_cli_bad_grid_exits_2():
    r = run_cli("no_such_grid")
    assert r.returncode == 2
    assert "no_such_grid" in r.stderr and r.stdout == ""
    r = run_cli(str(FIXTURES / "heads_not_multiple.yaml"))
    assert r.returncode == 2
    assert "heads_not_multiple.yaml" in r.stderr and "gqa_6_over_4" in r.stderr and "heads_kv" in r.stderr
    r = run_cli("smoke", "--scenarios", "zzz_nothing")
    assert r.returncode == 2 and "zzz_nothing" in r.stderr


def test_cli_lists_the_big_grids():
    for name, n in (("optest", len(load_grid("optest"))), ("hopper", len(load_grid("hopper")))):
        r = run_cli(name)
        assert r.returncode == 0, r.stderr
        assert f"{n} scenario(s) of grid {name}" in r.stdout


def test_bench26fp8_is_bench26s_prefill_rows_in_fp8():
    """Same row numbers and shapes as bench26's prefill rows, so fp8 and bf16 line up row by row."""
    bf16 = {s.row: s for s in load_grid("bench26")}
    fp8 = load_grid("bench26fp8")
    assert [s.row for s in fp8] == list(range(1, 20)) + [25, 26]
    for s in fp8:
        b = bf16[s.row]
        assert s.dtype == "fp8" and b.dtype == "bf16" and s.name == b.name + "_fp8"
        assert s.flops() == b.flops()
        assert (s.batch, s.seqlen_q, s.seqlen_k, s.heads_q, s.heads_kv, s.head_dim, s.causal, s.window,
                s.softcap, s.seqlens_q) == (b.batch, b.seqlen_q, b.seqlen_k, b.heads_q, b.heads_kv,
                                            b.head_dim, b.causal, b.window, b.softcap, b.seqlens_q)


def test_min_bytes_counts_only_keys_a_query_sees():
    """A sliding window over a long cache reads only the window: min_bytes (the bandwidth fail line's
    numerator) must not count the keys no query sees, or an honest kernel would look impossible."""
    full = Scenario(name="d", batch=1, seqlen_q=1, seqlen_k=32768, heads_q=8, heads_kv=1, head_dim=128)
    win = Scenario(name="w", batch=1, seqlen_q=1, seqlen_k=32768, heads_q=8, heads_kv=1, head_dim=128,
                   causal=True, window=(1023, 0))
    per_key = 1 * (128 + 128) * 2
    assert full.min_bytes() - win.min_bytes() == (32768 - 1024) * per_key
    pre = Scenario(name="p", batch=1, seqlen_q=4096, seqlen_k=4096, heads_q=8, heads_kv=8, head_dim=128,
                   causal=True, window=(1024, 0))
    assert pre._seen() == (4096, 4096)             # windows sliding over every key: all of them


def test_attention_chunk_is_validated_counted_and_only_written_when_set(tmp_path):
    """ABI 3's attention_chunk: a negative chunk names the field; the counts see only the row's own chunk
    (Sq = Sk = 6, causal, chunk 4: rows 0-3 see 1..4 keys, rows 4-5 see 1..2); a scenario without one
    writes no such key (old runs and the frozen grids read as before)."""
    msg = grid_error(write(tmp_path, "grid: g\nscenarios:\n- {name: c, heads_q: 2, heads_kv: 2, head_dim: 64, "
                                     "batch: 1, seqlen_q: 6, seqlen_k: 6, attention_chunk: -2}\n"))
    assert_names(msg, "g.yaml", "'c'" if "'c'" in msg else "c", "attention_chunk")
    s = Scenario(name="c", heads_q=2, heads_kv=2, head_dim=64, batch=1, seqlen_q=6, seqlen_k=6, causal=True,
                 attention_chunk=4)
    assert s.attended() == (1 + 2 + 3 + 4) + (1 + 2)
    assert s.to_dict()["attention_chunk"] == 4 and "chunk4" in s.short()
    assert "attention_chunk" not in Scenario(name="d", heads_q=2, heads_kv=2, head_dim=64, batch=1, seqlen_q=6,
                                             seqlen_k=6).to_dict()


def test_varlen_grid_is_packed_prefill_with_awkward_lengths():
    """The varlen grid (session 23): every row packs its queries (cu_seqlens), is a prefill, and between them the
    rows hold sequences that end mid-tile (not a multiple of 128 rows), one-row sequences, more keys than
    queries (a chunk over its prefix), GQA 4 and 8, head dims 64 and 128, and a non-causal row; row 1 is
    bench26's row 18."""
    grid = load_grid("varlen")
    assert [s.row for s in grid] == list(range(1, len(grid) + 1))
    assert all(s.varlen and s.group == "prefill" and s.dtype == "bf16" for s in grid)
    lens = [q for s in grid for q in s.seqlens_q]
    assert any(q % 128 for q in lens) and 1 in lens
    assert any(k > q for s in grid for q, k in zip(s.seqlens_q, s.seqlens_k))
    assert {s.heads_q // s.heads_kv for s in grid} >= {2, 4, 8} and {s.head_dim for s in grid} == {64, 128}
    assert any(not s.causal for s in grid)
    r18 = next(s for s in load_grid("bench26") if s.row == 18)
    v1 = grid[0]
    assert (v1.seqlens_q, v1.seqlens_k, v1.heads_q, v1.heads_kv, v1.head_dim, v1.causal) == (
        r18.seqlens_q, r18.seqlens_k, r18.heads_q, r18.heads_kv, r18.head_dim, r18.causal)
