"""Every number written in the paper's documents (../shared/seeds/) is an entry of data/paper/ or is
listed in data/paper/left_out.yaml with its reason; each entry states a unit only where its sentence
does (else it is marked unit_assumed). The checks against the documents skip where they are absent;
the checker itself is tested on documents written here."""
import pytest

from kernelseek import paper
from kernelseek import seed_numbers as S

SEEDS = paper.SEEDS_DIR
needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the paper's documents are not here ({SEEDS}): "
                                 "their numbers cannot be checked (CI has ../shared/seeds)")


@needs_seeds
def test_every_number_of_the_documents_is_an_entry_or_left_out():
    missing = S.uncovered(paper.load(), S.left_out(paper.PAPER_DIR), SEEDS)
    assert missing == [], "numbers with no entry and no reason to leave them out:\n" + "\n".join(map(str, missing))


@needs_seeds
def test_left_out_items_quote_their_source():
    texts = {p.name: p.read_text(encoding="utf-8") for p in SEEDS.glob("*.txt")}
    for x in S.left_out(paper.PAPER_DIR):
        assert x.as_written in x.sentence and x.sentence in texts[x.source], x
        assert len(x.reason) > 15, x


def test_units_are_stated_or_marked_assumed():
    wrong = [(n.id, n.unit, n.unit_assumed) for n in paper.load() if S.unit_stated(n) == n.unit_assumed]
    assert wrong == []
    ids = {n.id: n for n in paper.load()}
    assert ids["eq-geomean-000"].unit_assumed and not ids["eq-geomean-003a"].unit_assumed   # 0.50 vs 0.48x
    assert ids["tp-host-fill-low"].unit == "us" and not ids["tp-host-fill-low"].unit_assumed


def test_the_numbers_the_issue_named_are_entries_of_their_own():
    vals = {(n.quantity, n.value) for n in paper.load()}
    assert {("turning_point_coverage_sink_error", 495), ("turning_point_coverage_leftpad_error", 103),
            ("turning_point_host_fill_low", 2), ("turning_point_host_fill_high", 5)} <= vals


def test_the_checker_on_a_document_written_here(tmp_path):
    doc = ("The agent reached 1.13x FA3 in 16 sessions over two days on hd96 and FlashAttention-3. "
           "It made 11,532 tool calls.")
    (tmp_path / "d.txt").write_text(doc)
    found = [o.text for o in S.occurrences("d.txt", doc)]
    assert found == ["1.13", "16", "two", "11,532"]              # hd96 and FlashAttention-3 are names
    s1 = "The agent reached 1.13x FA3 in 16 sessions over two days on hd96 and FlashAttention-3."
    e = paper.Number("a", "q", 1.13, "x FA3", "s", "d.txt", "1.13x FA3", s1)
    gone = S.LeftOut("d.txt", "two days", s1, "a duration we do not keep")
    assert [o.text for o in S.uncovered([e], [gone], tmp_path)] == ["16", "11,532"]
    calls = paper.Number("b", "q", 11532, "tool calls", "s", "d.txt", "11,532", "It made 11,532 tool calls.")
    sessions = paper.Number("c", "q", 16, "sessions", "s", "d.txt", "16 sessions", s1)
    assert S.uncovered([e, calls, sessions], [gone], tmp_path) == []
    assert S.unit_stated(e) and S.unit_stated(calls) and S.unit_stated(sessions)
    bare = paper.Number("d", "q", 0.5, "x FA3", "s", "d.txt", "0.50", "It stopped at 0.50 after 133 steps.")
    assert not S.unit_stated(bare)                               # neither x nor FA3 written: assumed
    assert not S.unit_stated(paper.Number("e", "q", 0.5, "x FA3", "s", "d.txt", "0.50x", "It stopped at 0.50x."))
