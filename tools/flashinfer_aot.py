"""Builds FlashInfer's JIT modules for sm_90a ahead of time (here: nvcc 13.0, no GPU; or on the GPU machine
in tools/gpu_peers.sh stage2), so a timed run loads them instead of compiling; `tools/flashinfer.sh stage`
drops them into flashinfer/data/aot/, the folder FlashInfer loads a prebuilt module from before it JITs.

    python3 tools/flashinfer_aot.py OUT_DIR [--jobs=N] [--grids=bench26,production] [NAME_SUBSTRING...]
    python3 tools/flashinfer_aot.py --list [--grids=...]     the modules, in order of use, and which scenarios

Which modules: exactly those the `flashinfer` baseline asks for on the grids' scenarios it computes
(kernelseek.baselines.flashinfer.module_plan, one per distinct plan, in order of first use), each named and
built by flashinfer.jit itself (module_name, module_spec): FA3 prefill for head dims 64/128/256 with or
without window and softcap; FA2 prefill ("_kv_stride_equal", the build FlashInfer 0.7.x loads) for decode
with tensor cores; CUDA-core decode for GQA groups below 4. A module missing here is declined, with its
name, by every run with KSEEK_FLASHINFER_JIT=0.

Needs flashinfer and apache-tvm-ffi importable for this Python (tools/flashinfer.sh aot unpacks them),
nvcc, ninja, and a libcuda.so to link against (a stub: the modules call only the runtime API).
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # kernelseek from this checkout

from kernelseek.baselines import flashinfer as FI   # noqa: E402
from kernelseek.scenarios import load_grid          # noqa: E402

GRIDS = ("bench26", "production")


def plans(grids=GRIDS) -> list[tuple[FI.ModulePlan, list[str]]]:
    """[(plan, the scenarios that use its module)], one per distinct module, in order of first use over
    `grids` (scenarios FlashInfer declines whatever is built are left out). Needs no FlashInfer."""
    fi, out = FI.FlashInfer(), {}
    for g in grids:
        for s in load_grid(g):
            if fi.supports(s)[0]:
                p = FI.module_plan(s)               # wrappers that load the same module share it
                key = (p.kind, p.backend, p.dtype, p.head_dim_qk, p.head_dim_vo, p.swa, p.cap)
                out.setdefault(key, (p, []))[1].append(f"{g}:{s.row or s.name}")
    return list(out.values())


def build_one(p: FI.ModulePlan, out: Path) -> str:
    """Build plan `p`'s module unless it is prebuilt or in `out`; copy the .so into `out`."""
    spec = FI.module_spec(p)
    dst = out / spec.name / f"{spec.name}.so"
    if dst.is_file() or spec.is_aot:
        return f"have  {spec.name}"
    t = time.time()
    spec.build(verbose=False)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(spec.jit_library_path, dst)
    return f"built {spec.name} in {time.time() - t:.0f} s ({dst.stat().st_size / 1e6:.1f} MB)"


def main(out: Path, only: list[str], jobs: int = 1, grids=GRIDS) -> int:
    """Build the modules whose names contain one of `only` (all if none), `jobs` modules at a time (each
    build is a ninja run over its own .cu files; on the GPU machine's 16 cores, several at once)."""
    from concurrent.futures import ThreadPoolExecutor
    out.mkdir(parents=True, exist_ok=True)
    todo = [p for p, _ in plans(grids) if not only or any(x in FI.module_name(p) for x in only)]
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for line in pool.map(lambda p: build_one(p, out), todo):
            print(line, flush=True)
    return 0


def listing(grids=GRIDS, names: bool = True) -> str:
    """One line per module: what it is, which scenarios use it, and (with FlashInfer) its name."""
    lines = []
    for p, used in plans(grids):
        name = FI.module_name(p) if names else ""
        lines.append(f"{p.describe():28} {p.wrapper:38} {','.join(used)[:60]:60} {name}".rstrip())
    return "\n".join(lines)


def _opt(args: list[str], key: str, default: str) -> str:
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"--{key}=")), default)


if __name__ == "__main__":
    argv = sys.argv[1:]
    grids = tuple(_opt(argv, "grids", ",".join(GRIDS)).split(","))
    if "--list" in argv:
        try:
            print(listing(grids))
        except ImportError:                     # no FlashInfer here: the plans without their names
            print(listing(grids, names=False))
        sys.exit(0)
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    sys.exit(main(Path(args[0]), args[1:], int(_opt(argv, "jobs", "1")), grids))
