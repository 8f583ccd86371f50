"""The five moments on real-looking histories: message fixtures, a short campaign, run fixtures."""
from pathlib import Path

import pytest
import yaml

from kernelseek import bank
from kernelseek.results import load as load_results
from kernelseek.triggers import (DEFAULT_NOISE, Evaluation, History, Message, claims_limit,
                                 correctness_excuse, detect, explains_away, limit_claim, plateau,
                                 start, suspicious_gain)

FIX = Path(__file__).resolve().parents[1] / "fixtures"
MSG = FIX / "messages"
LIMITS = yaml.safe_load((MSG / "limit_claims.yaml").read_text())
EXCUSES = yaml.safe_load((MSG / "excuses.yaml").read_text())


@pytest.mark.parametrize("text", LIMITS["claims"])
def test_limit_claims_fire(text):
    assert claims_limit(text)


@pytest.mark.parametrize("text", LIMITS["not_claims"])
def test_non_claims_do_not_fire(text):
    assert claims_limit(text) is None


@pytest.mark.parametrize("text", LIMITS["phrasings"])
def test_common_limit_phrasings_fire(text):
    assert len(LIMITS["phrasings"]) >= 20
    assert claims_limit(text), text


@pytest.mark.parametrize("text", LIMITS["not_phrasings"])
def test_common_non_claims_do_not_fire(text):
    assert len(LIMITS["not_phrasings"]) >= 20
    assert claims_limit(text) is None, claims_limit(text)


@pytest.mark.parametrize("text", EXCUSES["excuses"])
def test_excuses_fire(text):
    assert explains_away(text)


@pytest.mark.parametrize("text", EXCUSES["not_excuses"] + LIMITS["not_claims"])
def test_non_excuses_do_not_fire(text):
    assert explains_away(text) is None


def test_claim_returns_the_sentence():
    s = claims_limit(LIMITS["claims"][0])
    assert "genuine ceiling" in s and "0.87x" not in s


def campaign() -> History:
    doc = yaml.safe_load((MSG / "campaign.yaml").read_text())
    return History([Evaluation(**e) for e in doc["evaluations"]], [Message(**m) for m in doc["messages"]])


def test_campaign_fixture_moments():
    h = campaign()
    kinds = [m.kind for m in detect(h, n=2)]
    assert kinds == ["correctness_excuse", "plateau"]
    ce = correctness_excuse(h)
    assert ce.evidence["failed"] == ["c"] and "bf16" in ce.evidence["sentence"]
    assert ce.prefer_groups[0] == "correctness"
    assert start(h) is None and limit_claim(h) is None


def test_excuse_needs_a_failure_before_it():
    h = campaign()
    h.evaluations = h.evaluations[:3]            # no failed check yet
    assert correctness_excuse(h) is None
    h = campaign()
    h.evaluations.append(Evaluation(time=2730, geomean=0.62, speedups={"a": 0.6, "b": 0.6, "c": 0.6},
                                    statuses={"a": "passed", "b": "passed", "c": "passed"}))
    assert correctness_excuse(h) is None         # fixed before the message: nothing explained away


def test_plateau_by_count_and_noise():
    h = campaign()
    assert plateau(h, n=2) is not None           # 0.62 is within 3% of 0.61
    assert plateau(h, n=3) is None               # 0.62 is far above 0.44
    assert plateau(h, n=2, noise=0.01) is None   # measured noise 1%: 0.62 > 0.61 * 1.01
    h.noise = 0.01
    assert plateau(h, n=2) is None               # the history's measured noise is used
    assert plateau(h, n=10) is None              # too few evaluations to tell
    assert DEFAULT_NOISE == 0.03


def test_plateau_by_minutes():
    h = campaign()
    assert plateau(h, n=50, minutes=20, now=2760) is not None   # last 20 min: 0.62, before: 0.61
    assert plateau(h, n=50, minutes=40, now=2760) is None       # last 40 min: 0.62, before: 0.44


def test_start():
    assert start(History()).kind == "start"
    assert start(History([Evaluation(0, {"a": 0.4}, 0.4)])) is not None
    assert start(History([], [Message("assistant", "Reading the kernel.", 5)])) is None


def test_suspicious_jump_and_bound():
    a = Evaluation(0, {"x": 0.50, "y": 0.80}, 0.63)
    b = Evaluation(60, {"x": 1.60, "y": 0.82}, 1.15)
    m = suspicious_gain(History([a, b]))
    assert m.kind == "suspicious_gain" and set(m.evidence["jumps"]) == {"x"}
    assert m.prefer_groups[0] == "benchmark validity"
    assert suspicious_gain(History([a, b]), jump=4.0) is None
    c = Evaluation(120, {"x": 1.61, "y": 0.83}, 1.16, bound_fractions={"y": 1.3, "x": 0.7})
    m = suspicious_gain(History([b, c]))
    assert m.evidence["above_bound"] == ["y"] and m.prefer_groups == ("benchmark validity", "measurement check")


def test_history_from_run_fixtures():
    h = History.from_campaign(FIX / "runs" / "campaign")
    assert [round(e.geomean, 2) for e in h.evaluations] == [0.42, 0.87, 1.15]
    assert h.evaluations[0].time < h.evaluations[-1].time
    assert suspicious_gain(h) is None                         # 1 -> 2 is below 1.5x on every row
    early = History(h.evaluations[:2])
    assert set(suspicious_gain(early).evidence["jumps"]) == {"dense_causal", "paged_decode", "fp8_gqa"}
    rows, _ = load_results(FIX / "runs" / "unmet")
    ev = Evaluation.from_rows(rows, time=0, bounds={"paged_decode": {"sol_candidate": 1.2}})
    assert ev.failed == ["fp8_gqa"] and ev.bound_fractions == {"paged_decode": 1.2}


def test_optional_classifier():
    h = History([], [Message("assistant", "Moving on to the next row.", 1)])
    assert limit_claim(h) is None
    assert limit_claim(h, classify=lambda text, moment: True) is not None      # the model decides

    def broken(text, moment):
        raise RuntimeError("no API key")
    assert limit_claim(h, classify=broken) is None                            # falls back
    h2 = History([], [Message("assistant", "We are at the hardware limit.", 1)])
    assert limit_claim(h2, classify=lambda t, m: None) is not None            # abstains: patterns
    assert limit_claim(h2, classify=lambda t, m: False) is None               # the model says no


def test_only_the_latest_agent_message_counts():
    h = History([], [Message("assistant", "We are at the hardware limit.", 1),
                     Message("user", "Is this ceiling a property of the hardware?", 2),
                     Message("assistant", "Measured it: 58% of the bound. Working on the host side.", 3)])
    assert limit_claim(h) is None
    assert limit_claim(h, last=2) is not None


def test_moment_to_question():
    h = campaign()
    m = detect(h)[0]
    rows, meta = load_results(FIX / "runs" / "unmet")
    q = bank.select(m.kind, rows, meta=meta, prefer_groups=m.prefer_groups)
    assert q.moment == "correctness_excuse" and q.group == "correctness" and q.text.endswith("?")
