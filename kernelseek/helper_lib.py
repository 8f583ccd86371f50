"""The small CUDA helper libraries of kernelseek.attention (kernels/kv_update.cu, kernels/seqused_segments.cu):
built once per process through the harness's cached nvcc build and constraint check, loaded with ctypes."""
from __future__ import annotations

import ctypes
from pathlib import Path

_LIBS: dict[str, ctypes.CDLL] = {}


def load(kernel: Path) -> ctypes.CDLL:
    """The loaded library of `kernel` (a .cu file), built and checked on the first call per process."""
    dll = _LIBS.get(str(kernel))
    if dll is not None:
        return dll
    from . import build, constraints
    res = build.build(kernel)
    if not res.ok:
        raise RuntimeError(f"{kernel}: build failed:\n{res.log[-2000:]}")
    chk = constraints.check_binary(res.so_path)
    if not chk.ok:
        raise RuntimeError(f"{kernel}: refused by the constraint check: {'; '.join(chk.reasons)}")
    dll = ctypes.CDLL(str(res.so_path))
    _LIBS[str(kernel)] = dll
    return dll
