"""The equipped arm's step prompt: the tool-rich style the paper compared against.

Each step (the start, then each new full evaluation) the prompt carries: the parsed Nsight Compute
profile of the current best kernel, its bottleneck label, one optimization from a fixed menu chosen
by that label (not one tried before), the SASS instruction-mix change between the previous and the
current best, BM25 passages from the user's documentation folder, the seeded notes, and a memory
of recent steps. Profiling needs ncu and a GPU, the mix needs cuobjdump; where they are missing the
bundle says so. `profile_csv` and `sass` (config) replay recorded outputs instead.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

from ..kernel_source import closure, entry_file
from ..paths import AGENT_NOTES
from .tools import version_path

NOTES_FILE = AGENT_NOTES

# bottleneck label -> the fixed menu, in order of preference (16 optimizations in all)
MENU = {
    "memory-bound": ["vectorize global loads (128-bit)", "use asynchronous copies (TMA) into shared memory",
                     "double-buffer shared-memory tiles", "raise reuse with larger tiles"],
    "memory-latency-bound": ["prefetch the next tile while computing the current one",
                             "increase bytes in flight per warp", "use asynchronous copies (TMA) into shared memory"],
    "compute-bound": ["move matrix products to tensor cores (warpgroup MMA)", "use faster exponentials (exp2 with "
                      "a folded scale)", "overlap softmax with the next matrix product (ping-pong warpgroups)"],
    "synchronization-bound": ["replace block barriers with producer/consumer barriers",
                              "specialize warps (producer and consumer warpgroups)"],
    "occupancy-limited": ["reduce registers per thread (launch bounds)", "shrink shared memory per block",
                          "split the sequence across more blocks (split-KV)"],
    "latency-bound": ["increase instruction-level parallelism (unroll the inner loop)",
                      "persistent kernel with a tile scheduler", "split the sequence across more blocks (split-KV)"],
}
MENU["unprofiled"] = MENU["latency-bound"]


def bottleneck(summary: list[dict] | None) -> str:
    """A label for the first profiled launch: memory-bound, compute-bound, and so on."""
    if not summary:
        return "unprofiled"
    s = summary[0]
    sm, dram, occ = s.get("sm_pct") or 0.0, s.get("dram_pct") or 0.0, s.get("occupancy_achieved_pct")
    stall = s["top_stalls"][0][0] if s.get("top_stalls") else ""
    if dram >= 60 and dram >= sm:
        return "memory-bound"
    if sm >= 60:
        return "compute-bound"
    if stall in ("long_scoreboard", "lg_throttle", "drain"):
        return "memory-latency-bound"
    if stall in ("barrier", "membar", "sleeping"):
        return "synchronization-bound"
    if occ is not None and occ < 25:
        return "occupancy-limited"
    return "latency-bound"


def choose(label: str, tried: list[str]) -> str:
    """The first optimization of the label's menu not tried yet (the menu's first when all were)."""
    menu = MENU.get(label, MENU["latency-bound"])
    return next((m for m in menu if m not in tried), menu[0])


def kernel_names(source: str) -> list[str]:
    return re.findall(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*\(", source)


class Equipment:
    """Produces the step bundle; holds the docs index and what was tried."""

    def __init__(self, cfg, paths):
        self.cfg, self.paths = cfg, paths
        self.docs, self.docs_note = None, "no documentation folder given"
        if cfg.docs:
            try:
                from .retrieval import Docs
                self.docs = Docs(cfg.docs)
                self.docs_note = f"{len(self.docs.passages)} passages from {cfg.docs}"
            except (OSError, ImportError) as e:
                self.docs_note = f"documentation unavailable: {e}"
        notes = Path(cfg.notes) if cfg.notes else NOTES_FILE
        self.notes = notes.read_text() if notes.is_file() else ""
        self.sass_i = 0

    # ---- measurements (replayed or real) -------------------------------------------------------
    def profile(self, kernel: Path, worst: str | None) -> tuple[list[dict] | None, str]:
        from .. import profile as P
        if self.cfg.profile_csv:
            return P.summarize_ncu(P.parse_ncu_csv(Path(self.cfg.profile_csv).read_text())), \
                f"replayed from {Path(self.cfg.profile_csv).name}"
        if not P.find_tool("ncu"):
            return None, "no profile: Nsight Compute (ncu) not found"
        names = kernel_names("\n".join(f.read_text() for f in closure(entry_file(kernel))))
        out = self.paths.root / "profiles" / kernel.stem
        cmd = [sys.executable, "-m", "kernelseek", "eval", str(kernel), "--grid", self.cfg.grid, "--check-only",
               "--no-progress", "--runs-dir", str(out / "runs")] + (["--scenarios", worst] if worst else [])
        try:
            r = P.run_ncu(cmd, out, kernel_regex="|".join(names) or None)
        except (OSError, RuntimeError) as e:
            return None, f"no profile: {e}"
        return (r.summary or None), (f"ncu on {worst or 'the first scenario'}" if r.summary else "ncu gave no metrics")

    def mix(self, before: Path | None, after: Path) -> tuple[pd.DataFrame | None, str]:
        from .. import profile as P
        if self.cfg.sass:
            dumps = [Path(s) for s in self.cfg.sass]
            a, b = dumps[min(self.sass_i, len(dumps) - 1)], dumps[min(self.sass_i + 1, len(dumps) - 1)]
            self.sass_i += 1
            return P.mix_diff(P.instruction_mix(a.read_text()), P.instruction_mix(b.read_text())), "replayed SASS"
        if before is None:
            return None, "no earlier best to compare with"
        if not P.find_tool("cuobjdump"):
            return None, "no instruction mix: cuobjdump not found"
        from ..build import build
        try:
            sa, sb = build(before), build(after)
            if not (sa.ok and sb.ok):
                return None, "no instruction mix: a build failed"
            return P.mix_diff(P.instruction_mix(P.sass(sa.so_path)), P.instruction_mix(P.sass(sb.so_path))), "cuobjdump"
        except (OSError, RuntimeError, KeyError) as e:
            return None, f"no instruction mix: {e}"

    # ---- the bundle ------------------------------------------------------------------------------
    def bundle(self, evals: list[dict], tried: list[str]) -> tuple[str, dict]:
        """The step prompt and what it chose, from the campaign's evaluation events (oldest first)."""
        full = [e for e in evals if e.get("geomean") is not None and not e.get("filtered") and not e.get("check_only")]
        best = max(full, key=lambda e: e["geomean"]) if full else None
        prev_best = None
        for i, e in enumerate(full):
            if e is best:
                earlier = full[:i]
                prev_best = max(earlier, key=lambda x: x["geomean"]) if earlier else None
        kernel = self.paths.workspace / self.cfg.kernel_name
        if best is not None:
            kernel = version_path(self.paths, best["kernel_sha256"], self.cfg.kernel_name)
        worst = ((best or {}).get("summary") or {}).get("worst") or {}
        summary, psrc = self.profile(kernel, worst.get("scenario"))
        label = bottleneck(summary)
        opt = choose(label, tried)
        before = version_path(self.paths, prev_best["kernel_sha256"], self.cfg.kernel_name) if prev_best else None
        mix, msrc = self.mix(before, kernel) if best is not None else (None, "nothing evaluated yet")
        from ..profile import format_summary
        parts = ["## Step briefing",
                 "Current best: " + (f"evaluation {best['n']} at {best['geomean']:.3f}x geomean "
                                      f"(worst {worst.get('scenario')} at {worst.get('speedup', 0) or 0:.3f}x)"
                                      if best else "no evaluation yet"),
                 f"### Profile of the current best ({psrc})",
                 format_summary(summary) if summary else psrc,
                 f"### Bottleneck: {label}",
                 f"### Optimization to apply this step: {opt}",
                 f"### Instruction-mix change, previous best -> current best ({msrc})"]
        if mix is not None:
            moved = mix[mix["delta"] != 0] if "delta" in mix.columns else mix
            parts.append(moved.head(12).to_string(index=False) if len(moved) else "no change")
        query = " ".join([label, opt] + [k for k, _ in (summary[0].get("top_stalls") or [])[:3]] if summary else [label, opt])
        hits = self.docs.search(query, k=3) if self.docs else []
        parts.append(f"### Documentation ({self.docs_note})")
        parts += [f"[{Path(h.file).name}, score {h.score:.2f}]\n{h.text}" for h in hits] or ["(no passages)"]
        if self.notes:
            parts += ["### Notes", self.notes.strip()]
        parts.append("### Recent steps")
        parts += [f"- evaluation {e['n']}: " + (f"{e['geomean']:.3f}x" if e.get("geomean") is not None else "no geomean")
                  + (f", tried: {e['tried']}" if e.get("tried") else "") for e in evals[-5:]] or ["- none yet"]
        info = {"label": label, "optimization": opt, "profile": psrc, "mix": msrc, "docs": [h.file for h in hits],
                "best_eval": best["n"] if best else None}
        return "\n\n".join(parts), info
