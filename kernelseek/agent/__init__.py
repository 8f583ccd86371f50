"""The agent loop and its arms (see loop.py): a general-purpose coding agent held to the goal.

    from kernelseek.agent import Config, create, run_campaign
    paths = create(Config(kernel="kernels/naive_fwd.cu", grid="bench26", arm="bank"), "campaigns/x")
    outcome = run_campaign(paths.root)
"""
from .budget import Budget, Prices, Spend  # noqa: F401
from .config import ARMS, Config, Paths, create, load  # noqa: F401
from .loop import CampaignCrash, Loop, MissingKey, Outcome, run_campaign  # noqa: F401
from .replay import Replay, make_evaluator  # noqa: F401
