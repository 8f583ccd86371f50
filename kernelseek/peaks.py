"""Fail lines for impossible speed: each GPU's datasheet peaks, plus a small margin.

A row whose measured time implies more FLOP/s than the tensor cores can do, or more bytes/s than
the memory can deliver, did not do the work it claims: it is failed (evaluate.make_row), never just
flagged. The rates come from the row's own counts, which the kernel cannot change:
    tflops = flops / time          (flops: attended keys of every row, Scenario.flops)
    gbps   = min_bytes / time      (min_bytes: each input read once, the output written once)
and every time the row reports (per-call `time_ms`, `graph_ms` where it exists) is judged.

The lines are the vendor's published dense peaks (no sparsity), times 1 + MARGIN:
    H200 SXM: bf16/fp16 989 TFLOP/s, fp8 1,979 TFLOP/s, HBM3e 4.8 TB/s  -> 1,039 / 2,078 / 5,040
Why datasheet and not measured: measured ceilings (data/ceilings, `kernelseek ceilings`) are what
one library call reached on one day, and honest kernels beat them (fa3_hopper read 4.44 TB/s on
bench26 row 23 against a measured 4.32 TB/s; FA4 reaches 103% of the measured bf16 matmul rate).
They stay as information (the SOL fraction, the bounds notebook); a fail line must be physics.
The margin: the datasheet's tensor rate is quoted at 1,830 MHz while the SM clock may boost to
1,980 MHz (+8%), and a timer has a few percent of noise; no attention kernel comes near either
(FA3 and FA4 reach 75-80% of the quoted rate: softmax and the pipeline take the rest), so 5% above
the quoted peak stays a line no honest row crosses, and anything above it is off by far more (a
memoizer on bench26 row 9: 14,500 TFLOP/s).
Timed inputs are cold in the L2 (timing flushes it before every batch, see timing.py), so the
bandwidth line is HBM's; a row whose inputs could stay in the L2 would need its min_bytes read
faster than the HBM to cross it, which only the L2 can do and the flush prevents.

An unknown GPU has no line: `lines_for` returns None and evaluate records why in the run's meta.
"""
from __future__ import annotations

from dataclasses import dataclass

MARGIN = 0.05   # fraction above the datasheet peak before a row fails


@dataclass(frozen=True)
class Peaks:
    name: str             # the product, as the datasheet names it
    bf16_tflops: float    # dense bf16 (= fp16) tensor-core peak
    fp8_tflops: float | None   # dense fp8 e4m3 peak (None: no fp8 tensor cores)
    hbm_gbps: float       # memory bandwidth, GB/s (1e9 B/s)
    source: str           # where the numbers come from

    def tflops(self, dtype: str) -> float | None:
        return self.fp8_tflops if dtype == "fp8" else self.bf16_tflops


# Matched against torch's device name (get_device_properties().name), most specific first (GH200
# before H200, whose name it contains): lower-case substrings that must all occur.
_TABLE: list[tuple[tuple[str, ...], Peaks]] = [
    (("gh200",), Peaks("GH200 (H100 on Grace Hopper, HBM3e)", 989.0, 1979.0, 4900.0,
                       "NVIDIA GH200 datasheet (HBM3e 144 GB part; the HBM3 part has 4.0 TB/s)")),
    (("h200", "nvl"), Peaks("H200 NVL", 835.0, 1671.0, 4800.0, "NVIDIA H200 NVL datasheet")),
    (("h200",), Peaks("H200 SXM", 989.0, 1979.0, 4800.0, "NVIDIA H200 datasheet (SXM)")),
    (("h100", "nvl"), Peaks("H100 NVL", 835.0, 1671.0, 3900.0, "NVIDIA H100 NVL datasheet")),
    (("h100", "pcie"), Peaks("H100 PCIe", 756.0, 1513.0, 2000.0, "NVIDIA H100 datasheet (PCIe)")),
    (("h100",), Peaks("H100 SXM", 989.0, 1979.0, 3350.0, "NVIDIA H100 datasheet (SXM)")),
    (("h800",), Peaks("H800 SXM", 989.0, 1979.0, 3350.0, "NVIDIA H800 datasheet (SXM)")),
    (("b200",), Peaks("B200", 2250.0, 4500.0, 8000.0, "NVIDIA B200 / HGX B200 datasheet")),
    (("a100", "80gb", "pcie"), Peaks("A100 80GB PCIe", 312.0, None, 1935.0, "NVIDIA A100 datasheet")),
    (("a100", "80gb"), Peaks("A100 80GB SXM", 312.0, None, 2039.0, "NVIDIA A100 datasheet")),
    (("a100",), Peaks("A100 40GB", 312.0, None, 1555.0, "NVIDIA A100 datasheet")),
    (("l40s",), Peaks("L40S", 362.0, 733.0, 864.0, "NVIDIA L40S datasheet")),
]


def peaks_for(gpu: str | None) -> Peaks | None:
    """The datasheet peaks of a GPU by torch's device name ('NVIDIA H200'); None when unknown."""
    if not gpu:
        return None
    low = gpu.lower()
    for pats, p in _TABLE:
        if all(x in low for x in pats):
            return p
    return None


@dataclass(frozen=True)
class Lines:
    """The fail lines of one GPU: peaks x (1 + margin)."""
    peaks: Peaks
    margin: float = MARGIN

    def tflops(self, dtype: str) -> float | None:
        t = self.peaks.tflops(dtype)
        return None if t is None else t * (1 + self.margin)

    @property
    def gbps(self) -> float:
        return self.peaks.hbm_gbps * (1 + self.margin)

    def describe(self) -> dict:
        return {"gpu": self.peaks.name, "margin": self.margin, "source": self.peaks.source,
                "bf16_tflops": self.tflops("bf16"), "fp8_tflops": self.tflops("fp8"), "hbm_gbps": self.gbps}


def lines_for(gpu: str | None, margin: float = MARGIN) -> Lines | None:
    p = peaks_for(gpu)
    return Lines(p, margin) if p else None


def impossible(lines: Lines | None, dtype: str, flops: float | None, min_bytes: float | None,
               times_ms: dict[str, float | None]) -> str | None:
    """Why a row's speed is impossible on this GPU (a reason naming the rate and the line), or None.

    `times_ms` maps a time's name (time_ms, graph_ms) to its value; each is judged."""
    if lines is None:
        return None
    why = []
    for label, ms in times_ms.items():
        if not ms or ms <= 0:
            continue
        s = ms * 1e-3
        line_t = lines.tflops(dtype)
        if flops and line_t:
            rate = flops / s / 1e12
            if rate > line_t:
                why.append(f"{rate:,.0f} TFLOP/s ({label} {ms:.4g} ms) is above the {lines.peaks.name} "
                           f"{dtype} datasheet peak {lines.peaks.tflops(dtype):,.0f} + {lines.margin:.0%} "
                           f"= {line_t:,.0f}")
        if min_bytes:
            rate = min_bytes / s / 1e9
            if rate > lines.gbps:
                why.append(f"{rate:,.0f} GB/s of minimum traffic ({label} {ms:.4g} ms) is above the "
                           f"{lines.peaks.name} HBM datasheet peak {lines.peaks.hbm_gbps:,.0f} + "
                           f"{lines.margin:.0%} = {lines.gbps:,.0f}")
    if not why:
        return None
    return "faster than the hardware allows: " + "; ".join(why) + " (the work was not done as timed)"
