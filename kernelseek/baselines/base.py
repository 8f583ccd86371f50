"""What every baseline adapter is: availability, the scenarios it computes, and a bound call."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..scenarios import Scenario


@dataclass
class Bound:
    call: Callable[[], Any]                       # runs the attention once (what is timed)
    result: Callable[[Any], tuple]                # raw -> (o in kernel layout, lse or None)


class Baseline:
    name = "?"
    stand_in = False                               # computes a dense stand-in, not the same work

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str:
        return ""

    def where(self) -> str:
        """The file(s) this baseline's code is loaded from (a run's meta records it), or ""."""
        return ""

    def supports(self, s: Scenario) -> tuple[bool, str]:
        raise NotImplementedError

    def bind(self, s: Scenario, inp) -> Bound:
        raise NotImplementedError


def common_limits(s: Scenario, *, varlen=False, paged=False, window=False, softcap=False,
                  sinks=False, leftpad=False, seqused=False, fp8=False, dv_differs=False,
                  causal_unequal=True) -> tuple[bool, str]:
    """(True, "") when an adapter with these features computes `s`; else (False, the first one missing)."""
    checks = [
        (s.varlen and not varlen, "varlen"), (s.paged and not paged, "paged KV"),
        (s.window != (-1, -1) and not window, "sliding window"), (s.softcap > 0 and not softcap, "softcap"),
        (s.sinks and not sinks, "attention sinks"), (s.leftpad is not None and not leftpad, "left padding"),
        (s.cache_seqlens is not None and not seqused, "cache_seqlens"),
        (s.dtype == "fp8" and not fp8, "fp8"), (s.dv != s.head_dim and not dv_differs, "head_dim_v != head_dim"),
        (s.causal and not causal_unequal and not s.varlen and s.seqlen_q != s.seqlen_k,
         "causal with Sq != Sk (top-left aligned is_causal)"),
    ]
    for bad, what in checks:
        if bad:
            return False, f"no {what} support"
    return True, ""
