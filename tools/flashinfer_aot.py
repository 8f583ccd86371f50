"""Builds FlashInfer's JIT modules for sm_90a ahead of time, here (nvcc 13.0, no GPU), so the H200 does
not spend device time compiling them; `tools/flashinfer.sh stage` drops them into flashinfer/data/aot/,
the folder FlashInfer loads a prebuilt module from before it would JIT one.

    python3 tools/flashinfer_aot.py OUT_DIR [--jobs=N] [NAME_SUBSTRING...]   (tools/flashinfer.sh aot; on the
                                     GPU machine tools/gpu_peers.sh stage2 builds what is missing, 7 at once)

Needs flashinfer and apache-tvm-ffi importable for this Python (tools/flashinfer.sh aot unpacks them),
nvcc, ninja, and a libcuda.so to link against (a stub: the modules call only the runtime API).
The list is what kernelseek/baselines/flashinfer.py calls for bench26 and the production grid, in
order of use: decode with tensor cores runs FlashInfer's FA2 prefill kernels; prefill on Hopper its
FA3 kernels (head dims 64/128/256); MHA decode (group < 4) its CUDA-core decode kernels.
(kernelseek.baselines.flashinfer.module_name names the module a scenario needs.)
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import torch

BF16, I32 = torch.bfloat16, torch.int32
# (kind, backend, head_dim, sliding window, softcap)
MODULES = [
    ("prefill", "fa2", 128, False, False),    # paged decode, GQA group >= 4 (tensor cores)
    ("prefill", "fa3", 128, False, False),    # dense/varlen/paged prefill, hd128
    ("prefill", "fa3", 64, False, False),
    ("prefill", "fa3", 256, False, False),
    ("prefill", "fa3", 128, True, False),     # bench26 row 25, production row 9 (window)
    ("prefill", "fa3", 256, False, True),     # bench26 row 26, production row 10 (softcap)
    ("decode", "", 128, False, False),        # paged decode, group < 4 (CUDA cores; the hopper grid's MHA)
]


def spec_for(kind: str, backend: str, d: int, swa: bool, cap: bool):
    from flashinfer.jit.attention.modules import gen_batch_decode_module, gen_batch_prefill_module
    if kind == "decode":
        return gen_batch_decode_module(BF16, BF16, BF16, I32, d, d, 0, swa, cap)
    return gen_batch_prefill_module(backend, BF16, BF16, BF16, I32, d, d, 0, swa, cap, False)


def build_one(m, out: Path) -> str:
    """Build module `m` (a MODULES entry) unless it is prebuilt or in `out`; copy the .so into `out`."""
    spec = spec_for(*m)
    dst = out / spec.name / f"{spec.name}.so"
    if dst.is_file() or spec.is_aot:
        return f"have  {spec.name}"
    t = time.time()
    spec.build(verbose=False)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(spec.jit_library_path, dst)
    return f"built {spec.name} in {time.time() - t:.0f} s ({dst.stat().st_size / 1e6:.1f} MB)"


def main(out: Path, only: list[str], jobs: int = 1) -> int:
    """Build the MODULES whose names contain one of `only` (all if none), `jobs` modules at a time (each
    build is a ninja run over its own .cu files; on the GPU machine's 16 cores, several at once)."""
    from concurrent.futures import ThreadPoolExecutor
    out.mkdir(parents=True, exist_ok=True)
    todo = [m for m in MODULES if not only or any(x in spec_for(*m).name for x in only)]
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for line in pool.map(lambda m: build_one(m, out), todo):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--jobs=")]
    jobs = int(next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--jobs=")), "1"))
    if not args:
        sys.exit(__doc__)
    sys.exit(main(Path(args[0]), args[1:], jobs))
