"""KernelSeek: question-driven GPU kernel optimization.

The flow, one module per stage: scenarios -> inputs -> build -> constraints -> worker (abi) ->
check (reference) -> timing (baselines) -> results -> triage / bounds / profile -> triggers ->
bank -> agent -> traces. Importing this package imports no torch and touches no GPU.
"""
__version__ = "0.1.0"

from .scenarios import Scenario, load_grid  # noqa: E402,F401
from .results import Row, load as load_results, summarize  # noqa: E402,F401
