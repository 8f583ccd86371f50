"""The five moments, detected over a campaign's history of evaluations and agent messages.

    start               the campaign has at most one evaluation and no agent message yet
    plateau             no geomean gain above the noise over the last N evaluations or T minutes
    limit_claim         the agent's latest message claims a limit, a ceiling, or completion
    suspicious_gain     a row jumped by >= `jump` times, or a row newly beats its roofline bound
                        or is newly flagged by the harness (benchmark validity first)
    correctness_excuse  a failed check followed by talk of tolerance, precision, flakiness, noise

Plain functions over plain dataclasses. Text classifiers use patterns; pass `classify(text,
moment) -> bool | None` to let a model decide (None or an exception falls back to the patterns).
`detect(history)` runs all five; `bank.select(moment.kind, ..., prefer_groups=moment.prefer_groups)`
turns a moment into a question. Moments are events, each asked once by a questioner (arms.Bank
keys them): a plateau by the record evaluation it started from (evidence `since`), a suspicious
gain by the evaluation whose rows were newly flagged, a claim or an excuse by its message.
"""
from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import store

DEFAULT_NOISE = 0.03      # relative run-to-run noise assumed when the analysis has not measured it
PLATEAU_EVALS = 5         # evaluations without a gain above the noise
DEFAULT_JUMP = 1.5        # a row at >= 1.5x its previous speedup is suspicious
AGENT_ROLES = ("assistant", "agent")

Classifier = Callable[[str, str], "bool | None"]


@dataclass
class Evaluation:
    time: float                                    # seconds (any clock shared with the messages)
    speedups: dict = field(default_factory=dict)   # scenario -> speedup or None
    geomean: float | None = None
    statuses: dict = field(default_factory=dict)   # scenario -> passed | failed | error | ...
    bound_fractions: dict = field(default_factory=dict)  # scenario -> time bound / time (>1: impossible)
    suspicious: list = field(default_factory=list)  # scenarios the harness flagged (not yet reviewed)
    label: str = ""
    kernel: str = ""                               # kernel_sha256 of the evaluated source

    @property
    def failed(self) -> list[str]:
        return [s for s, st in self.statuses.items() if st == "failed"]

    @classmethod
    def from_rows(cls, rows, time: float, bounds=None, label: str = "", kernel: str = "",
                  reviews=()) -> "Evaluation":
        """From results.Row objects; bounds as for bank.bound_fractions; flagged rows that a review
        covers (review.py) are not counted as flagged."""
        from .bank import bound_fractions
        from .results import summarize
        from .review import covering
        return cls(time=time, speedups={r.scenario: r.speedup for r in rows},
                   geomean=summarize(rows)["geomean_speedup"] if rows else None,
                   statuses={r.scenario: r.status for r in rows},
                   bound_fractions=bound_fractions(bounds),
                   suspicious=[r.scenario for r in rows if r.suspicious and not covering(list(reviews), kernel, r)],
                   label=label, kernel=kernel or "")

    @classmethod
    def from_run(cls, path, bounds: dict | None = None) -> "Evaluation":
        """From a run directory: time from meta `time` (epoch seconds) or the file's mtime."""
        from .results import load
        p = Path(path)
        res = store.results_file(p)
        rows, meta = load(res)
        t = meta.get("time")
        if not isinstance(t, (int, float)):
            try:
                t = calendar.timegm(time.strptime(meta["started_utc"], "%Y-%m-%dT%H:%M:%SZ"))
            except (KeyError, TypeError, ValueError):
                t = res.stat().st_mtime
        from .review import load_reviews, reviews_path
        try:
            reviews = load_reviews(reviews_path(res))
        except ValueError:
            reviews = []
        return cls.from_rows(rows, t, bounds, label=str(p), kernel=meta.get("kernel_sha256") or "",
                             reviews=reviews)


@dataclass
class Message:
    role: str          # assistant (the agent), user (a human or the questioner), tool
    text: str
    time: float = 0.0


@dataclass
class History:
    evaluations: list = field(default_factory=list)   # Evaluation, oldest first
    messages: list = field(default_factory=list)      # Message, oldest first
    noise: float | None = None                        # measured relative noise, when known

    @classmethod
    def from_campaign(cls, path, messages=(), noise: float | None = None) -> "History":
        """Evaluations of a campaign, in order (store.Campaign.eval_dirs)."""
        dirs = store.campaign_evals(path)
        return cls([Evaluation.from_run(d) for d in dirs], list(messages), noise)


@dataclass
class Moment:
    kind: str                                   # one of bank.MOMENTS
    reason: str                                 # one line: why it fired
    prefer_groups: tuple = ()                   # groups to ask from first
    evidence: dict = field(default_factory=dict)


# ---- text ----------------------------------------------------------------------------------
_NEG = re.compile(r"\b(not|never|far from|below|short of|yet to|if|whether|unless|rather than|"
                  r"instead of|rule out|ruled out|claim(ed)? that|thought|assumed|believed|once|until|"
                  r"before|as soon as)\b|n't\b", re.I)
_LIMIT = [re.compile(p, re.I) for p in (
    r"\b(hardware|physical|fundamental|theoretical|architectural|genuine|hard|real)\s+"
    r"(ceiling|limit|limitation|bound|floor|wall)s?\b",
    r"\b(hit|hitting|reached|reaching|at|against|near)\s+(a|the|its|our)?\s*(hard\s+)?(ceiling|wall)\b",
    r"\b(not enough|insufficient|ran out of|runs? out of)\s+(\w+\s+)?(registers|shared memory|smem)\b",
    r"\b(can ?not|can't|couldn't|won't|will not)\s+(go|get|be made|run|make it)\s+(any\s+|much\s+)?"
    r"(faster|quicker|better)\b",
    r"\b(no|little|not much)\s+(more\s+|further\s+|remaining\s+)?(room|headroom|gains?\s+left|"
    r"further\s+improvement)\b",
    r"\bnothing\s+(more|else|left)\s+(to|that)\b",
    r"\b(can't|cannot|don't|do not)\s+see\s+(any\s+)?(more\s+|further\s+)?(room|headroom|way to (go|get) faster)\b",
    r"\bdiminishing returns\b",
    r"\b(is|are|already|essentially|effectively|nearly|near)\s+(optimal|at peak)\b",
    r"\bas\s+(fast|good)\s+as\s+(it|this|we)\s+(can|will|could)\s+(get|be|go)\b",
    r"\b(inherent|irreducible|unavoidable)\b",
    r"\b(impossible|not (possible|achievable|feasible))\b",
    r"\bsaturat(ed|es|ing)\s+(the\s+)?(memory\s+|hbm\s+|dram\s+)?bandwidth\b",
    r"\b(goal|target|task|objective)\s+(is\s+|has been\s+|was\s+)?(now\s+)?(fully\s+)?"
    r"(met|achieved|reached|complete|completed|done|accomplished)\b",
    r"\b(i'm|we're|i am|we are)\s+(all\s+)?(done|finished)\s*([.!]|$|,?\s*(here|now)\b)",
    r"\b(this|that)\s+(completes|concludes|wraps up)\b",
    r"\b(this|that|it) is (the|our|my) final (version|result|kernel)\b",
    # common phrasings (tests/fixtures/messages/limit_claims.yaml: phrasings / not_phrasings)
    r"\bas\s+(fast|good|quick|far)\s+as\s+(the\s+)?(hardware|gpu|architecture|physics|chip|memory system|"
    r"bandwidth|h100|h200)\s+(allows|permits|will allow|lets us|can go)\b",
    r"\bas\s+(fast|good|far)\s+as\s+(it|this|things)\s+(gets|goes)\b",
    r"\bno\s+(further|more|additional)\s+(speed-?ups?|gains?|improvements?|optimi[sz]ations?|performance)\s+"
    r"(is|are|seems?|appears?)\s+(possible|achievable|feasible|available|left)\b",
    r"\b(no|little|not much|nothing much)\s+(more\s+|further\s+)?(performance\s+|speed\s+)?(left\s+)?to\s+"
    r"(gain|squeeze|optimi[sz]e|win|get)\b",
    r"\b(reached|hit|hitting|reaching|at|near)\s+(the|a|its|our)\s+(practical\s+|hardware\s+|physical\s+)?"
    r"(limit|limits|roofline|peak|speed of light)\b",
    r"\b(effectively|essentially|basically|practically)\s+(the|at the|at)\s+(ceiling|limit|peak|roofline)\b",
    r"\b(don't|do not|doubt)\s+(think|believe|expect)\s+(that\s+)?(we|it|this|the kernel|anything)\s+(can|could|will)\s+"
    r"(beat|match|exceed|outperform|go faster|get faster|improve|do better)\b",
    r"\b(can ?not|can't|couldn't|won't|will not|unable to)\s+(beat|outperform|do better|go further|improve on)\b",
    r"\b(would|will|could|can)\s+(only\s+)?(yield|give|bring|buy|produce)\s+(only\s+)?(marginal|negligible|minimal|tiny)\b",
    r"\bexhausted\s+(the\s+|all\s+|every\s+|my\s+|our\s+)?(\w+\s+){0,2}(opportunities|options|ideas|avenues|"
    r"optimi[sz]ations)\b",
    r"\b(goal|target|task|objective|work|job|implementation|optimi[sz]ation)\s+(is|has been|was)\s+(now\s+)?"
    r"(fully\s+)?(complete|completed|done|finished)\b",
    r"\b(i'll|i will|we'll|we will|let's|i am going to|i'm going to)\s+stop\s+(here|now|optimi[sz]ing|working)\b",
    r"\b(limited|bound|capped|dictated|constrained|determined|bottlenecked)\s+by\s+(the\s+)?(hardware|architecture|"
    r"physics|hbm|memory bandwidth|hbm bandwidth|the gpu)\b",
    r"\b(any|further|additional)\s+(further\s+|additional\s+)?(speed-?ups?|gains?|improvements?)\s+would\s+"
    r"(require|need|mean)\b",
    r"\b(consider|deem|call)\s+(this|the|it)\s+(task\s+|work\s+|job\s+|kernel\s+)?(finished|done|complete|completed)\b",
    r"\b(fully|completely|thoroughly|maximally)\s+optimi[sz]ed\b",
    r"\bfinal\s+(version|kernel|result|implementation)\s+is\s+(ready|done|complete)\b",
    r"\b(the\s+)?best\s+(we|i|it|this)\s+(can|could)\s+(do|get|achieve|manage)\b",
    r"\b(it's|it is|this is|that's|that is)\s+(now\s+)?(optimal|near-optimal|close to optimal)\b",
    r"\bno\s+more\s+(performance|speed|gains?)\s+to\b",
)]
_TOPIC = re.compile(r"\b(tolerances?|atol|rtol|thresholds?|precision|rounding|numeric(al|ally)?|"
                    r"floating[- ]point|flaky|flakiness|flakes?|non-?determinis\w*|noise|noisy|ulps?)\b", re.I)
_CUE = re.compile(r"\b(due to|because of|caused by|attributable to|comes? from|just|merely|expected|"
                  r"acceptable|within|harmless|benign|spurious|probably|likely|inherent|ignorable|"
                  r"negligible|ignore|fine|okay|close enough|not a real|not a bug|rather than a bug|"
                  r"too (tight|strict))\b", re.I)
_STRONG = re.compile(r"\b(flaky|flakiness|close enough|(loosen|relax|widen|bump|raise|increase)\w*\s+"
                     r"(the\s+)?(tolerance|atol|rtol|threshold)s?|tolerances? (is|are) too (tight|strict)|"
                     r"reference (is|may be|might be|could be) (wrong|off|inaccurate|imprecise))\b", re.I)
_DENIAL = re.compile(r"\s*(no|none of|nothing|neither)\s+\S", re.I)   # a clause opening with a denial


def _sentences(text: str) -> list[str]:
    """Sentences; wrapped lines are joined, bullets, headings and blank lines end a sentence."""
    text = re.sub(r"\n(?!\s*([-*#>]|\d+[.)]\s|\n))", " ", text or "")
    return [s.strip() for s in re.split(r"(?<=[.!?;])\s+|\n+", text) if s.strip()]


def _negated(sentence: str, start: int, words: int = 5) -> bool:
    """Whether a negation or a conditional sits in the last few words of the clause before `start`."""
    clause = re.split(r"[,;:()]|\s[-\u2013\u2014]\s", sentence[:start])[-1]
    if _DENIAL.match(clause):          # "No prefill row is at a hardware limit"
        return True
    return bool(_NEG.search(" ".join(clause.split()[-words:])))


def claims_limit(text: str) -> str | None:
    """The sentence in which the text claims a limit or completion; None if it does not."""
    for s in _sentences(text):
        if s.endswith("?"):
            continue
        for pat in _LIMIT:
            m = pat.search(s)
            if m and not _negated(s, m.start()):
                return s
    return None


def explains_away(text: str) -> str | None:
    """The sentence that puts a failure down to tolerance, precision, flakiness or noise."""
    for s in _sentences(text):
        if s.endswith("?"):
            continue
        m = _STRONG.search(s)
        if m and not _negated(s, m.start()):
            return s
        t, c = _TOPIC.search(s), _CUE.search(s)
        if t and c and not _negated(s, t.start()) and not _negated(s, c.start()):
            return s
    return None


def _classify(text: str, moment: str, rule, classify: Classifier | None) -> str | None:
    if classify is not None:
        try:
            verdict = classify(text, moment)
        except Exception:  # a model is optional: any failure falls back to the patterns
            verdict = None
        if verdict is not None:
            return (rule(text) or text.strip()[:200]) if verdict else None
    return rule(text)


def _agent(messages) -> list[Message]:
    return [m for m in messages if m.role in AGENT_ROLES]


# ---- detectors -----------------------------------------------------------------------------
def start(h: History) -> Moment | None:
    if len(h.evaluations) <= 1 and not _agent(h.messages):
        return Moment("start", "the campaign is starting: no agent message yet",
                      evidence={"evaluations": len(h.evaluations)})
    return None


def plateau(h: History, n: int = PLATEAU_EVALS, minutes: float | None = None,
            noise: float | None = None, now: float | None = None) -> Moment | None:
    """No geomean above the earlier best by more than the noise over the last `n` evaluations,
    or over the last `minutes` (with an evaluation older than that window to compare against)."""
    noise = noise if noise is not None else (h.noise if h.noise is not None else DEFAULT_NOISE)
    ev = [e for e in h.evaluations if e.geomean is not None]
    records, best = [], None        # evaluations that beat every earlier one by more than the noise
    for i, e in enumerate(ev):
        if best is None or e.geomean > best * (1 + noise):
            records.append(i)
            best = e.geomean if best is None else max(best, e.geomean)

    def stalled(k) -> tuple[float, int] | None:
        """(best before, index of the record the plateau starts from) if ev[:k] vs ev[k:] stalled."""
        before, window = ev[:k], ev[k:]
        if not before or not window:
            return None
        best_before = max(e.geomean for e in before)
        if max(e.geomean for e in window) > best_before * (1 + noise):
            return None
        return best_before, max(i for i in records if i < k)
    if len(ev) > n:
        b = stalled(len(ev) - n)
        if b is not None:
            return Moment("plateau", f"no gain above {noise:.1%} noise over the last {n} evaluations "
                          f"(best {b[0]:.3f}x before them)",
                          evidence={"best": b[0], "since": b[1], "evaluations": n, "noise": noise})
    if minutes is not None and ev:
        if now is None:
            now = max([ev[-1].time] + [m.time for m in h.messages])
        cut = now - 60 * minutes
        b = stalled(sum(e.time < cut for e in ev)) if all(
            a.time <= c.time for a, c in zip(ev, ev[1:])) else None
        if b is not None:
            return Moment("plateau", f"no gain above {noise:.1%} noise in the last {minutes:g} minutes "
                          f"(best {b[0]:.3f}x before them)",
                          evidence={"best": b[0], "since": b[1], "minutes": minutes, "noise": noise})
    return None


def limit_claim(h: History, classify: Classifier | None = None, last: int = 1) -> Moment | None:
    """The latest `last` agent messages, checked for a claimed limit or completion."""
    for m in reversed(_agent(h.messages)[-last:]):
        s = _classify(m.text, "limit_claim", claims_limit, classify)
        if s:
            return Moment("limit_claim", f"the agent claims a limit or completion: {s[:160]!r}",
                          ("challenge a limit", "agent process"), {"sentence": s, "time": m.time})
    return None


def _flagged(e: Evaluation) -> set[str]:
    return {s for s, f in e.bound_fractions.items() if f > 1.0} | set(e.suspicious)


def suspicious_gain(h: History, jump: float = DEFAULT_JUMP) -> Moment | None:
    """A row newly above its roofline bound or newly flagged by the harness (not so in the
    evaluation before), or a row that jumped by `jump`x since the evaluation before. A row that
    stays flagged fires once, when it first is: a new event, not a standing state. A row a review
    covers (review.py) is not flagged at all, so a row whose review lapses is flagged anew."""
    if not h.evaluations:
        return None
    cur = h.evaluations[-1]
    prev = h.evaluations[-2] if len(h.evaluations) > 1 else None
    above = sorted(s for s, f in cur.bound_fractions.items() if f > 1.0)
    new = sorted(_flagged(cur) - (_flagged(prev) if prev is not None else set()))
    if new:
        from types import SimpleNamespace
        from .review import flag_signature
        flagged = [SimpleNamespace(scenario=n, speedup=cur.speedups.get(n), suspicious=True) for n in cur.suspicious]
        # the kernel and the flagged speedups (review.py): what a review of this flag would cover
        sig = flag_signature(cur.kernel, flagged) + ("|above:" + ",".join(above) if above else "")
        return Moment("suspicious_gain", f"{len(new)} row(s) newly faster than the bound allows or flagged "
                      f"by the harness: {', '.join(new[:4])}", ("benchmark validity", "measurement check"),
                      {"above_bound": above, "flagged": list(cur.suspicious), "new": new, "signature": sig})
    if prev is None:
        return None
    jumps = {s: cur.speedups[s] / p for s, p in prev.speedups.items()
             if p and p > 0 and cur.speedups.get(s) and cur.speedups[s] / p >= jump}
    if jumps:
        top = sorted(jumps, key=jumps.get, reverse=True)
        return Moment("suspicious_gain", f"{len(jumps)} row(s) jumped by >= {jump:g}x since the previous "
                      f"evaluation: " + ", ".join(f"{s} {jumps[s]:.2f}x" for s in top[:4]),
                      ("benchmark validity", "measurement check", "hypothesis check"),
                      {"jumps": jumps, "new": sorted(jumps)})
    return None


def correctness_excuse(h: History, classify: Classifier | None = None) -> Moment | None:
    """A failed check, then an agent message (before the next all-passing evaluation) that puts it
    down to tolerance, precision, flakiness or noise."""
    fails = [i for i, e in enumerate(h.evaluations) if e.failed]
    if not fails:
        return None
    i = fails[-1]
    t0 = h.evaluations[i].time
    fixed = [e.time for e in h.evaluations[i + 1:] if e.statuses and not e.failed]
    t1 = min(fixed) if fixed else float("inf")
    for m in _agent(h.messages):
        if t0 <= m.time < t1:
            s = _classify(m.text, "correctness_excuse", explains_away, classify)
            if s:
                failed = h.evaluations[i].failed
                return Moment("correctness_excuse", f"{len(failed)} row(s) failed the check and the agent "
                              f"explains it away: {s[:160]!r}", ("correctness", "hypothesis check"),
                              {"failed": failed, "sentence": s, "time": m.time})
    return None


def detect(h: History, *, classify: Classifier | None = None, noise: float | None = None,
           n: int = PLATEAU_EVALS, minutes: float | None = None, jump: float = DEFAULT_JUMP) -> list[Moment]:
    """Every moment that fires now, most urgent first, each aimed at the groups its evidence
    points to (question_focus.aim)."""
    from .question_focus import aim
    found = [correctness_excuse(h, classify), suspicious_gain(h, jump), limit_claim(h, classify),
             plateau(h, n, minutes, noise), start(h)]
    return [aim(m, h) for m in found if m is not None]
