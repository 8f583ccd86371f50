"""The probes (tests/probes/) compile with the real nvcc against the kernel folder, and their shared
CPU reference (probe_common.cuh) agrees with the harness's semantics, on the CPU.

Each probe includes kernels/fa3_hopper/fa3_hopper.cu, so a kernel change that breaks a probe fails
here, not on the H200. Compiling the three takes about 2.5 minutes of CPU. probe_fp8 has a mode
that needs no GPU (`selftest`: its references and the harness's pass rule on ideal outputs), run
here too. Running the probes on the GPU: tests/gpu/test_probes_gpu.py.
"""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch

from kernelseek import build as kb
from kernelseek.reference import mask_for

REPO = Path(__file__).resolve().parents[2]
PROBES_DIR = REPO / "tests" / "probes"
PROBES = ("probe_fa3", "probe_decode", "probe_fp8")
NVCC_FLAGS = ("-gencode=arch=compute_90a,code=sm_90a", "-O2")   # as tools/gpu_round.sh builds them


def _nvcc() -> str:
    try:
        return kb.find_nvcc()
    except kb.NvccNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """name -> (nvcc's exit status, its output, the executable)."""
    nvcc, out = _nvcc(), tmp_path_factory.mktemp("probes")
    built = {}
    for name in PROBES:
        exe = out / name
        p = subprocess.run([nvcc, *NVCC_FLAGS, "-o", str(exe), str(PROBES_DIR / f"{name}.cu")],
                           capture_output=True, text=True, timeout=1800)
        built[name] = (p.returncode, p.stdout + p.stderr, exe)
    return built


@pytest.mark.parametrize("name", PROBES)
def test_probe_compiles_against_the_kernel_folder(probes, name):
    rc, log, exe = probes[name]
    assert rc == 0 and exe.is_file(), log[-3000:]
    assert "warning" not in log.lower(), log[-3000:]


def test_probe_fp8_selftest_passes_without_a_gpu(probes):
    rc, log, exe = probes["probe_fp8"]
    assert rc == 0, log[-3000:]
    p = subprocess.run([str(exe), "selftest"], capture_output=True, text=True, timeout=600)
    lines = p.stdout.splitlines()
    passed = [ln for ln in lines if ln.startswith("[PASS] (f8)")]
    assert p.returncode == 0 and not [ln for ln in lines if ln.startswith("[FAIL]")], p.stdout[-3000:]
    assert lines[-1] == f"ALL PASS: 0 failure(s) ({len(passed)} passed)" and len(passed) >= 30


# ---- the shared CPU reference against the harness's masks and a float64 softmax -------------------
CASES = [  # sq, sk, d, dv, window_left, window_right, causal, softcap, sink
    (5, 9, 8, 8, -1, -1, 0, 0.0, None),
    (5, 9, 8, 16, -1, -1, 1, 0.0, None),
    (9, 5, 8, 8, -1, -1, 1, 0.0, 1.5),      # Sq > Sk causal: the first rows see no key
    (7, 12, 16, 8, 3, 2, 0, 0.0, None),     # sliding window
    (7, 12, 8, 8, 0, 0, 0, 0.0, -0.5),      # the diagonal only
    (6, 10, 8, 8, 4, -1, 1, 5.0, 8.0),      # causal + left window, softcap, a dominant sink
]

REF_CHECK = r"""
#include "%(kernel)s"
#include "%(common)s"
// q[i][c], k[j][c], v[j][c] of a case: smooth deterministic values in [-1, 1]
static double qv(int i, int c) { return sin(0.7 * i + 0.31 * c + 0.1); }
static double kv(long j, int c) { return cos(0.43 * j - 0.27 * c); }
static double vv(long j, int c) { return sin(0.19 * j * (c + 1) + 0.5); }
int main() {
  const double cases[][9] = {%(cases)s};
  for (const auto& cs : cases) {
    const int sq = (int)cs[0], sk = (int)cs[1], d = (int)cs[2], dv = (int)cs[3];
    const float sink = (float)cs[8];
    const bool has_sink = !std::isnan(cs[8]);
    for (int i = 0; i < sq; ++i) {
      long lo, hi;
      ref_visible(i, sq, sk, (int)cs[4], (int)cs[5], cs[6] != 0, &lo, &hi);
      double o[64];
      const double lse = ref_row(d, dv, lo, hi, 1.0 / sqrt((double)d), cs[7], has_sink ? &sink : nullptr,
                                 [&](int c) { return qv(i, c); }, kv, vv, o);
      printf("%%.17g", lse);  // then o[0..dv), one line per row
      for (int c = 0; c < dv; ++c) printf(" %%.17g", o[c]);
      printf("\n");
    }
  }
  return 0;
}
"""


def _torch_rows(sq, sk, d, dv, wl, wr, causal, softcap, sink):
    """The same rows from the harness's mask (kernelseek.reference.mask_for) and a float64 softmax."""
    i, j = torch.arange(sq, dtype=torch.float64), torch.arange(sk, dtype=torch.float64)
    c, cv = torch.arange(d, dtype=torch.float64), torch.arange(dv, dtype=torch.float64)
    q = torch.sin(0.7 * i[:, None] + 0.31 * c[None, :] + 0.1)
    k = torch.cos(0.43 * j[:, None] - 0.27 * c[None, :])
    v = torch.sin(0.19 * j[:, None] * (cv[None, :] + 1) + 0.5)
    s = (q @ k.T) / math.sqrt(d)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    vis = mask_for(sq, sk, wl, wr, bool(causal))
    s = s.masked_fill(~vis, float("-inf"))
    if sink is not None:
        s = torch.cat([s, torch.full((sq, 1), float(torch.tensor(sink, dtype=torch.float32)), dtype=torch.float64)], 1)
    lse = torch.logsumexp(s, dim=1)
    p = torch.exp(s - lse[:, None])[:, :sk]
    o = torch.nan_to_num(p) @ v
    empty = ~vis.any(dim=1)
    return torch.where(empty, float("-inf"), lse), torch.where(empty[:, None], 0.0, o)


def test_shared_cpu_reference_agrees_with_the_harness_semantics(tmp_path):
    nvcc = _nvcc()
    rows = ",\n".join("{" + ", ".join(str(x) if x is not None else "NAN" for x in cs) + "}" for cs in CASES)
    src = tmp_path / "ref_check.cu"
    src.write_text(REF_CHECK % {"kernel": REPO / "kernels" / "fa3_hopper" / "fa3_hopper.cu",
                                "common": PROBES_DIR / "probe_common.cuh", "cases": rows})
    exe = tmp_path / "ref_check"
    # the fallback variant: the reference needs the harness header, not the fast kernels (seconds to build)
    b = subprocess.run([nvcc, *NVCC_FLAGS, "-DKSEEK_FA3_FORCE_FALLBACK=1", "-o", str(exe), str(src)],
                       capture_output=True, text=True, timeout=900)
    assert b.returncode == 0, b.stdout + b.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    got = [{"lse": float(ln.split()[0]), "o": [float(x) for x in ln.split()[1:]]} for ln in out.splitlines()]
    at = 0
    for cs in CASES:
        lse, o = _torch_rows(*cs)
        for r in range(cs[0]):
            g = got[at]
            at += 1
            if math.isinf(lse[r]):
                assert g["lse"] == float("-inf") and all(x == 0 for x in g["o"]), (cs, r, g)
            else:
                assert abs(g["lse"] - float(lse[r])) < 1e-12, (cs, r)
                assert max(abs(a - float(b)) for a, b in zip(g["o"], o[r])) < 1e-12, (cs, r)
    assert at == len(got) == sum(cs[0] for cs in CASES)
