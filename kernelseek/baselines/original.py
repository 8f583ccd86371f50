"""Another kernel file as a baseline (e.g. the campaign's starting kernel), built and launched
through kernelseek.abi, exactly as the worker launches the candidate."""
from __future__ import annotations

from .base import Baseline, Bound


class Original(Baseline):
    """Another kernel file through the ABI (e.g. the campaign's starting kernel)."""

    def __init__(self, path: str):
        self.path = path
        self.name = f"original:{path}"
        self._lib = None

    def _load(self):
        if self._lib is None:
            from .. import abi, build
            res = build.build(self.path)
            if not res.ok:
                raise RuntimeError(f"baseline {self.path} failed to build:\n{res.log[-2000:]}")
            self._lib = abi.load(res.so_path)
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
