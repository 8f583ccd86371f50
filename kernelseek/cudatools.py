"""Where the CUDA command-line tools are (ncu, cuobjdump, nvdisasm): $CUDA_HOME/bin, PATH,
/usr/local/cuda/bin, Nsight Compute's install folders, or the PyPI wheels (no GPU needed for the
last two of those tools). nvcc has its own lookup in build.py (KSEEK_NVCC first)."""
from __future__ import annotations

import glob
import os
import shutil


def find_tool(name: str) -> str | None:
    """Path of a CUDA tool (ncu, cuobjdump, nvdisasm), or None."""
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for d in dirs:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    hit = shutil.which(name)
    if hit:
        return hit
    cands = [f"/usr/local/cuda/bin/{name}"] + sorted(glob.glob(f"/opt/nvidia/nsight-compute/*/{name}"), reverse=True)
    try:  # PyPI wheels: nvidia/cu13/bin/<tool> (13.x) or nvidia/cuda_<tool>/bin/<tool> (12.x)
        import nvidia
        for root in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(root, "*", "bin", name)))
    except ImportError:
        pass
    return next((c for c in cands if os.access(c, os.X_OK)), None)


def need_tool(name: str) -> str:
    p = find_tool(name)
    if not p:
        hint = "Nsight Compute" if name == "ncu" else f"`pip install nvidia-cuda-{name}` provides it"
        raise FileNotFoundError(f"{name} not found in $CUDA_HOME/bin, PATH, /usr/local/cuda/bin ({hint})")
    return p
