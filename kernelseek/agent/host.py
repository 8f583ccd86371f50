"""What a campaign's start (and resume) event says about the machine it runs on."""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys


def gpu_name() -> str | None:
    """The first GPU's name from nvidia-smi, or None (no driver, no GPU)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def host_info() -> dict:
    """git revision of the toolkit, GPU, host name and Python version."""
    from ..evaluate import git_revision
    return {"git_rev": git_revision(), "gpu": gpu_name(), "host": platform.node(), "python": sys.version.split()[0]}
