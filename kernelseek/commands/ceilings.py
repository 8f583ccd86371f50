"""`kernelseek ceilings`: measure this GPU's matrix rates, bandwidth and launch overhead."""
from __future__ import annotations

import json

from . import about
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
        print("ceilings: no CUDA device here (torch.cuda.is_available() is False)")
        return 2
    c = BD.measure_ceilings(args.device, quick=args.quick)
    print(json.dumps(c, indent=1))
    print(f"wrote {BD.save_ceilings(c, args.out)}")
    return 0
