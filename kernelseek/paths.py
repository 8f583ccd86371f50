"""Where the repository's files live: the one module that locates the checkout.

Every path here is derived from this file's place in the checkout (kernelseek/paths.py), so no other
module computes the repository root from its own `__file__` (tests/unit/test_store_layout.py checks
this). Environment overrides (KERNELSEEK_BANK, KSEEK_CEILINGS_DIR, ...) stay with the module that
reads them; this module only gives their defaults. Importing it touches nothing on disk.

    from kernelseek import paths
    paths.KERNELS / "naive_fwd.cu"
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent       # kernelseek/
REPO = PACKAGE.parent                           # the checkout (or the directory holding the package)

KERNELS = REPO / "kernels"                      # kernel sources and kseek.h, the C ABI header
KSEEK_H = KERNELS / "kseek.h"
GRIDS = PACKAGE / "grids"                       # the named scenario grids (bench26, hopper, ...)
BANK = REPO / "bank"                            # the question bank's YAML files
GOALS = REPO / "goals"
DEFAULT_GOAL = GOALS / "default.yaml"
NOTEBOOKS = REPO / "notebooks"                  # the notebooks report and campaign execute
AGENT_NOTES = PACKAGE / "agent" / "notes.md"    # the equipped arm's seeded notes

DATA = REPO / "data"
DATA_RUNS = DATA / "runs"                       # committed run directories (H200 results)
TRACES = DATA / "traces"                        # curated and imported traces
CEILINGS = DATA / "ceilings"                    # measured ceilings per GPU, <gpu slug>.json
PRICES = DATA / "prices.yaml"                   # model prices for the agent's budget
PAPER = DATA / "paper"                          # the paper's recorded numbers
SHARED = REPO.parent / "shared"                 # the workplace's shared folder beside the checkout
