"""The baseline names, `get` by name, `choose` (and `choose_why`) for a spec (best | all | names | FILE.cu), `best`'s
order, and the dense stand-in reported beside paged rows."""
from __future__ import annotations

from typing import Callable

from ..scenarios import Scenario
from .base import Baseline
from .flash_attn import FA3, FA4
from .flashinfer import FlashInfer
from .flex import Flex
from .original import Original
from .torch_native import FlashOp, Sdpa, SdpaDenseStandIn

REGISTRY: dict[str, Callable[[], Baseline]] = {
    "cudnn": lambda: Sdpa("cudnn"), "fa2": lambda: Sdpa("fa2"), "flash_op": FlashOp,
    "fa4": FA4, "fa3": FA3, "flashinfer": FlashInfer, "flex": Flex,
}
# `best` tries these; flex only where none of them computes the scenario (it was slower than FA4
# and cuDNN on every bench26 shape they share, ../shared/reference/, and compiling it per shape
# costs seconds). Name it explicitly (`--baseline flex` or `all`) to time it anyway.
BEST_ORDER = ("cudnn", "fa4", "fa3", "flashinfer", "fa2", "flash_op")


def get(name: str) -> Baseline:
    if name.startswith("original:"):
        return Original(name.split(":", 1)[1])
    if name.endswith(".cu"):
        return Original(name)
    if name not in REGISTRY:
        raise ValueError(f"unknown baseline '{name}' (known: best, all, {', '.join(REGISTRY)}, original:FILE.cu)")
    return REGISTRY[name]()


def choose(spec: str, s: Scenario, cache: dict | None = None) -> tuple[list[Baseline], list[str]]:
    """Adapters to time for `spec` (best | all | name[,name] | FILE.cu) and why others were skipped
    ("name: why" strings; choose_why gives them as a dict)."""
    picked, declined = choose_why(spec, s, cache)
    return picked, [f"{n}: {why}" for n, why in declined.items()]


def choose_why(spec: str, s: Scenario, cache: dict | None = None) -> tuple[list[Baseline], dict[str, str]]:
    """Adapters to time for `spec`, and {name: why} for each one tried that will not run on `s`: unavailable
    here, or declining the scenario (a results row keeps these: Row.baselines_declined)."""
    cache = {} if cache is None else cache

    def inst(n):
        if n not in cache:
            cache[n] = get(n)
        return cache[n]
    names = list(BEST_ORDER) if spec == "best" else list(REGISTRY) if spec == "all" else spec.split(",")
    picked, declined = [], {}
    for n in names:
        b = inst(n)
        ok, why = b.available()
        if ok:
            ok, why = getattr(b, "supports_now", b.supports)(s)   # what it computes here and now
        if ok:
            picked.append(b)
        else:
            declined[b.name] = why or "declined"
    if spec == "best" and not picked:
        b = inst("flex")
        ok, why = b.available()
        if ok:
            ok, why = b.supports(s)
        if ok:
            picked.append(b)
        else:
            declined["flex"] = why or "declined"
    return picked, declined


def stand_in_for(s: Scenario) -> Baseline | None:
    """A labeled dense stand-in reported beside paged rows (cuDNN on gathered K/V)."""
    b = SdpaDenseStandIn()
    ok, _ = b.available()
    return b if ok and b.supports(s)[0] else None
