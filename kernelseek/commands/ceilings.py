"""`kernelseek ceilings`: measure this GPU's matrix rates, bandwidth and launch overhead.

Needs a CUDA GPU: without one it stops at once, one line, exit 2.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import UserError, about, user_input
from .. import bounds as BD


def register(subparsers) -> None:
    p = subparsers.add_parser("ceilings", description=about(__doc__))
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke test, not for committing")
    p.add_argument("--out", default=str(BD.CEILINGS_DIR), help="directory for <gpu>.json")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch
    if not torch.cuda.is_available():
        raise UserError("no CUDA device here (torch.cuda.is_available() is False); ceilings are measured on the GPU")
    if not 0 <= args.device < torch.cuda.device_count():
        raise UserError(f"--device {args.device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    with user_input(args.out, errors=(OSError,)):       # before minutes of measuring, not after
        Path(args.out).mkdir(parents=True, exist_ok=True)
    c = BD.measure_ceilings(args.device, quick=args.quick)
    print(json.dumps(c, indent=1))
    print(f"wrote {BD.save_ceilings(c, args.out)}")
    return 0
