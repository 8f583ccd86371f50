"""tools/reserve_figure.py on session 24's committed reserve sweep: the values parsed are the table's, every
reserve gave the same output bits, the figure is written, and a truncated table is refused naming its line."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWEEP = REPO / "data" / "fa3api" / "session24-e6f9c27" / "reserve_sweep.txt"


def test_the_sweep_is_parsed_and_drawn(tmp_path, load_tool):
    rf = load_tool("reserve_figure")
    reserves, rows = rf.parse(SWEEP)
    assert reserves == [0, 1, 8, 20, 40]
    assert len(rows) == 12 and rows["s01_llama3_8b_4x512_dec64_ctx1k-4k_p16"]["graph"][0] == 373.7
    assert rows["varlen_q_dense"]["fa3"] == 51.4 and rows["append_plain_varlen"]["fa3"] is None
    assert all(all(r["same"]) for r in rows.values())          # the arrangement never changed an output bit
    # what NOTES v24 reads from it: no reserve moves s08 by 1%, one stream is the slowest on s09
    s08, s09 = rows["s08_deepseek_v3_tp8_mla_2x512_dec128_ctx1k-8"]["graph"], None
    assert max(s08) / min(s08) < 1.01
    s09 = next(r for n, r in rows.items() if n.startswith("s09"))["graph"]
    assert s09[0] == max(s09)
    out = tmp_path / "r.png"
    assert rf.main(["--out", str(out), str(SWEEP)]) == 0
    assert out.stat().st_size > 20_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_a_row_missing_a_cell_is_refused_with_its_line(tmp_path, load_tool):
    lines = SWEEP.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("s03"))
    lines[i] = re.sub(r"\s*[\d.]+/\s*\d+[=!]\s*$", "", lines[i])   # drop the last reserve's cell
    bad = tmp_path / "sweep.txt"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"sweep.txt:{i + 1}: 4 cells for 5 reserves"):
        load_tool("reserve_figure").parse(bad)
