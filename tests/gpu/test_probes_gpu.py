"""The probes (tests/probes/) built with nvcc and run on the GPU: each block of the kernel folder
against its CPU reference, then kseek_fwd end to end. probe_fa3's end-to-end section also runs
under the build variants that change the prefill schedule (kernels/fa3_hopper/variants.cuh), one
build each: the dynamic tile counter with many short sections, static round-robin, VAR 0 and 1,
the flat tile order. Every probe ends with "ALL PASS: 0 failure(s)" or "FAILED: ..."; its exit
status is 0 only on ALL PASS. About 1-2 minutes per build on the H200's CPUs, seconds per run.
"""
from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

REPO = Path(__file__).resolve().parents[2]
PROBES_DIR = REPO / "tests" / "probes"
FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-O2"]
# (name, probe, build variant flags, arguments): probe_fa3's variants run only its (f) section
RUNS = [("fa3", "probe_fa3", [], []),
        ("decode", "probe_decode", [], ["check"]),
        ("fp8", "probe_fp8", [], []),
        ("fa3-dynamic", "probe_fa3", ["-DKSEEK_FA3_SCHED=dynamic", "-DKSEEK_FA3_SECTION_MB=0.5"], ["f"]),
        ("fa3-static", "probe_fa3", ["-DKSEEK_FA3_SCHED=static"], ["f"]),
        ("fa3-var0", "probe_fa3", ["-DKSEEK_FA3_VARIANT=0"], ["f"]),
        ("fa3-var1", "probe_fa3", ["-DKSEEK_FA3_VARIANT=1"], ["f"]),
        ("fa3-flat", "probe_fa3", ["-DKSEEK_FA3_ORDER=flat"], ["f"])]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """Every build of RUNS, in parallel: name -> (nvcc's status, its output, the executable)."""
    from kernelseek.build import find_nvcc
    nvcc, out = find_nvcc(), tmp_path_factory.mktemp("probes_gpu")

    def one(run):
        name, probe, flags, _ = run
        exe = out / name
        p = subprocess.run([nvcc, *FLAGS, *flags, "-o", str(exe), str(PROBES_DIR / f"{probe}.cu")],
                           capture_output=True, text=True, timeout=1800)
        return name, (p.returncode, p.stdout + p.stderr, exe)

    with ThreadPoolExecutor(max_workers=min(len(RUNS), os.cpu_count() or 1)) as ex:
        return dict(ex.map(one, RUNS))


@pytest.mark.parametrize("name, args", [(r[0], r[3]) for r in RUNS], ids=[r[0] for r in RUNS])
def test_probe_passes_on_the_gpu(built, name, args):
    rc, log, exe = built[name]
    assert rc == 0, log[-3000:]
    p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PROBE_NO_BENCH": "1"})
    lines = p.stdout.splitlines()
    fails = [ln for ln in lines if ln.startswith("[FAIL]")]
    assert p.returncode == 0 and not fails and lines and lines[-1].startswith("ALL PASS: 0 failure(s)"), \
        "\n".join(fails[:10] + lines[-20:])
