"""kernelseek.constraints on real binaries built by nvcc from tests/fixtures/constraints/.

Each fixture names its trick in its header comment; each must be refused with a reason naming
what gave it away, and the honest naive kernel (built once per session, cache shared with
test_build.py) must pass.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelseek import build as kb
from kernelseek.constraints import check_binary, check_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "constraints"
NAIVE = kb.REPO_KERNELS / "naive_fwd.cu"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "kseek-build-cache"   # shared with test_build.py


def _built(name: str | Path, cache: Path, extra=()) -> Path:
    r = kb.build(FIXTURES / name, extra_flags=extra, cache_dir=cache)   # an absolute name wins
    assert r.ok, r.log
    return r.so_path


def test_naive_kernel_passes(cache):
    so = _built(NAIVE, cache)
    res = check_binary(so)
    assert res.ok and res.reasons == [] and res.notes == []
    assert check_source(NAIVE).ok


def test_libcudart_dependency_is_allowed(cache):
    so = _built(NAIVE, cache)
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
    assert "libcudart.so" in needed           # the runtime really is a dependency ...
    assert check_binary(so).ok                # ... and it is not refused


def test_imported_cublas_symbol_is_refused(cache):
    res = check_binary(_built("calls_cublas.cu", cache))
    assert not res.ok
    assert res.reasons == ["symbol cublasCreate_v2 imported (undefined) in .dynsym: cuBLAS"]


def test_dlopen_of_cublas_is_refused(cache):
    res = check_binary(_built("dlopen_cublas.cu", cache))
    assert not res.ok
    assert any("'libcublas.so.13'" in r and ".rodata" in r for r in res.reasons), res.reasons
    assert any("'cublasCreate_v2'" in r for r in res.reasons), res.reasons
    assert any("imports dlopen" in r for r in res.reasons), res.reasons   # run-time loading is refused


def test_dt_needed_on_a_cublas_library_is_refused(cache, tmp_path):
    stub = tmp_path / "libcublas.so.99"
    cc = subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcublas.so.99", "-o", str(stub),
                         str(FIXTURES / "fake_cublas.c")], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    so = _built("links_fake_cublas.cu", tmp_path / "cache",
                extra=("-Xlinker", "--no-as-needed", f"-L{tmp_path}", "-l:libcublas.so.99"))
    res = check_binary(so)
    # the library name also sits in .dynstr: reported once, as the dependency
    assert res.reasons == ["needs library libcublas.so.99 (DT_NEEDED): cuBLAS"]


@pytest.mark.parametrize("strip", [False, True])
def test_cutlass_namespace_is_refused(cache, strip):
    so = _built("cutlass_namespace.cu", cache, extra=("-Xlinker", "-s") if strip else ())
    res = check_binary(so)
    assert not res.ok
    assert any("_ZN7cutlass11gemm_kernelEPf" in r and "CUTLASS" in r for r in res.reasons), res.reasons
    assert any(".nv_fatbin" in r and "N7cutlass" in r for r in res.reasons), res.reasons
    if strip:   # no symbol table left: the registration string in .rodata still names it
        assert any("string '_ZN7cutlass11gemm_kernelEPf' in .rodata" in r for r in res.reasons)


def test_source_scan_refuses_vendor_headers_and_names():
    res = check_source(FIXTURES / "includes_vendor_headers.cu")
    assert not res.ok
    text = "\n".join(res.reasons)
    for needle in ("cublas_v2.h: cuBLAS", "cutlass/gemm/device/gemm.h: CUTLASS", "cute/tensor.hpp: CuTe",
                   '"libcudnn.so.9" names cuDNN'):
        assert needle in text, text
    assert len(res.reasons) == 4                  # kseek.h is followed and clean


def test_not_an_elf_file(tmp_path):
    f = tmp_path / "fake.so"
    f.write_text("not a binary")
    res = check_binary(f)
    assert not res.ok and "not a readable ELF file" in res.reasons[0]
    assert not check_binary(tmp_path / "missing.so").ok
