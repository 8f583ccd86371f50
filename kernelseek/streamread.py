"""The measured memory-read ceiling: a streaming-read kernel at its best, and torch's reductions.

How (`kernelseek ceilings` calls `best_read_gbps`):
  - kernelseek/native/stream_read.cu, built with nvcc for this GPU's architecture: a grid-stride
    loop in which every thread issues UNROLL 16-byte loads (ld.global.cs, streaming) before using
    any, XOR-folded so the compiler keeps them. The sweep covers threads per block {256, 512, 1024},
    blocks per SM {1, 2, 4, 8, 16} and UNROLL {2, 4, 8}; each configuration reads the whole buffer
    (random fp32, 4 GiB by default: far past the 50-60 MB L2, so every byte comes from HBM) `reps`
    times, each read timed alone with CUDA events, and its median counts.
  - torch's own reads of the same buffer: sum and amax in fp32, sum in bf16 (torch.sum gave the old
    ceiling, 4.32 TB/s on the H200).
The ceiling is the best median of all; every configuration's rate is kept (`sweep`) so a reader
can see how flat the top is. Bytes read / seconds, in GB/s (1e9 B/s). It is information (the SOL
fraction, bounds.py), never a fail line (peaks.py: the datasheet's HBM rate + 5%).
"""
from __future__ import annotations

import ctypes
import hashlib
import statistics
import subprocess
from pathlib import Path

from .paths import PACKAGE

SRC = PACKAGE / "native" / "stream_read.cu"
THREADS = (256, 512, 1024)
BLOCKS_PER_SM = (1, 2, 4, 8, 16)
UNROLLS = (2, 4, 8)


def build(arch: str, cache_dir=None) -> Path:
    """stream_read.so for `arch` (sm_90a, ...), cached by source and arch."""
    from .build import arch_flags, cache_root, find_nvcc
    h = hashlib.sha256(SRC.read_bytes() + arch.encode()).hexdigest()[:16]
    out = cache_root(cache_dir) / "shim" / f"stream_read-{arch}-{h}.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.so")
    cmd = [find_nvcc(), "-O3", "-shared", "-Xcompiler", "-fPIC", *arch_flags(arch), str(SRC), "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"building stream_read.cu failed: {r.stderr.strip()[-600:]}")
    tmp.replace(out)
    return out


def _median_ms(fn, reps: int) -> float:
    import torch
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def best_read_gbps(gib: float = 4, reps: int = 10, device: int = 0) -> tuple[float, str, dict]:
    """(best read GB/s, how it was reached, every configuration's GB/s)."""
    import torch
    dev = torch.device("cuda", device)
    props = torch.cuda.get_device_properties(dev)
    arch = f"sm_{props.major}{props.minor}" + ("a" if props.major >= 9 else "")
    x = torch.rand(int(gib * 2 ** 28), device=dev, dtype=torch.float32)     # gib GiB
    nbytes = x.numel() * 4
    sweep: dict[str, float] = {}
    try:
        lib = ctypes.CDLL(str(build(arch)))
        lib.kseek_stream_read.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                          ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        sink = torch.zeros(4, dtype=torch.int32, device=dev)
        stream = ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)
        for t in THREADS:
            for bps in BLOCKS_PER_SM:
                for u in UNROLLS:
                    blocks = bps * props.multi_processor_count

                    def run(t=t, blocks=blocks, u=u):
                        rc = lib.kseek_stream_read(x.data_ptr(), nbytes, blocks, t, u, sink.data_ptr(), stream)
                        if rc:
                            raise RuntimeError(f"stream_read launch failed (cudaError {rc})")
                    run()
                    sweep[f"kernel threads={t} blocks/SM={bps} unroll={u}"] = nbytes / (_median_ms(run, reps) * 1e-3) / 1e9
    except (RuntimeError, OSError, FileNotFoundError) as e:
        sweep["kernel unavailable"] = 0.0
        sweep_note = f"; the streaming kernel was not run: {str(e)[:200]}"
    else:
        sweep_note = ""
    xb = x.to(torch.bfloat16)
    for label, fn, nb in (("torch.sum fp32", lambda: x.sum(), nbytes), ("torch.amax fp32", lambda: x.amax(), nbytes),
                          ("torch.sum bf16", lambda: xb.sum(), xb.numel() * 2)):
        fn()
        sweep[label] = nb / (_median_ms(fn, reps) * 1e-3) / 1e9
    best = max(sweep, key=sweep.get)
    how = (f"best of {len(sweep)} reads of {gib:g} GiB of random data (median of {reps} event-timed reads "
           f"each): {best}{sweep_note}")
    return sweep[best], how, {k: round(v, 1) for k, v in sweep.items()}
