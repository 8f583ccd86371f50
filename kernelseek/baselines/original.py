"""Another kernel file as a baseline (e.g. the campaign's starting kernel), built and launched
through kernelseek.abi, exactly as the worker launches the candidate."""
from __future__ import annotations

from .base import Baseline, Bound

PREBUILT_ENV = "KSEEK_PREBUILT"     # JSON {FILE.cu: built .so} for a confined worker, which runs no nvcc


def original_paths(spec: str) -> list[str]:
    """The kernel files a baseline spec names (original:FILE.cu or FILE.cu entries)."""
    names = [] if spec in ("best", "all") else spec.split(",")
    return [n.split(":", 1)[1] if n.startswith("original:") else n for n in names
            if n.startswith("original:") or n.endswith(".cu")]


class Original(Baseline):
    """Another kernel file through the ABI (e.g. the campaign's starting kernel)."""

    def __init__(self, path: str):
        self.path = path
        self.name = f"original:{path}"
        self._lib = None

    def _load(self):
        if self._lib is None:
            import json
            import os

            from .. import abi, build
            from ..host_gate import check as host_gate
            so = json.loads(os.environ.get(PREBUILT_ENV) or "{}").get(self.path)
            if not so:                       # a confined worker gets it built by the parent (evaluate.py)
                res = build.build(self.path)
                if not res.ok:
                    raise RuntimeError(f"baseline {self.path} failed to build:\n{res.log[-2000:]}")
                so = res.so_path
            refused = host_gate(so)          # it runs in the trusted baseline worker: gated like a candidate
            if refused:
                raise RuntimeError(f"baseline {self.path} refused: " + "; ".join(refused[:3]))
            self._lib = abi.load(so)
        return self._lib

    def version(self):
        from ..build import source_hash
        return f"sha256 {source_hash(self.path)[:12]}"

    def supports(self, s):
        return True, ""

    def bind(self, s, inp):
        from .. import abi
        from ..inputs import alloc_outputs
        call = abi.Launch(self._load(), s, inp, *alloc_outputs(s, inp))   # call() -> (o, lse)
        return Bound(call, lambda r: r)
