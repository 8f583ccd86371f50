"""kernelseek.build with the real nvcc: the naive kernel, the cache, compile errors, the CLI.

The naive kernel (several seconds for sm_90a) is built once per session into a cache under the
session's temporary directory, shared with test_constraints.py; other builds use tiny kernels.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelseek import abi, build as kb
from kernelseek.cli import main as cli_main

NAIVE = kb.REPO_KERNELS / "naive_fwd.cu"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "constraints"
TINY = '#include "kseek.h"\n__global__ void tiny(float* x) { x[threadIdx.x] *= %s; }\n' \
       'extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t s) { return KSEEK_ERR_UNSUPPORTED; }\n'


@pytest.fixture(scope="module")
def session_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "kseek-build-cache"   # shared by the test modules


@pytest.fixture(scope="module")
def naive(session_cache) -> kb.BuildResult:
    r = kb.build(NAIVE, cache_dir=session_cache)
    assert r.ok, r.log
    return r


def test_naive_builds_with_ptxas_report(naive):
    assert naive.so_path.is_file() and naive.so_path.suffix == ".so"
    assert "-gencode=arch=compute_90a,code=sm_90a" in naive.flags and "-v" in naive.flags
    # 3 input dtypes x 2 output dtypes of the main kernel, 2 x 2 (16-bit) of the wide one (head dims past 256)
    assert len(naive.ptxas) == 10
    assert sum("naive_wide_kernel<" in k["demangled"] for k in naive.ptxas) == 4
    for k in naive.ptxas:
        assert ("naive_fwd_kernel" in k["kernel"] or "naive_wide_kernel" in k["kernel"]) and k["arch"] == "sm_90a"
        assert 0 < k["registers"] <= 255
        assert k["smem_bytes"] > 0
        assert k["spill_stores_bytes"] == k["spill_loads_bytes"] == k["stack_bytes"] == 0
    assert len(naive.key) == 64 and naive.source_hash == kb.source_hash(NAIVE)


def test_naive_validates_params_without_a_gpu(naive):
    """Parameter checks run on the host before any CUDA call, so they answer on a CPU machine."""
    try:
        lib = abi.load(naive.so_path)
    except OSError as e:
        pytest.skip(f"the CUDA runtime library cannot be loaded here: {e}")
    assert lib.name() == "naive_fwd"
    p = abi.KseekParams()
    assert lib.fwd(p, 0) == 5                       # abi_version 0: KSEEK_ERR_ABI
    p.abi_version = abi.ABI_VERSION
    assert lib.fwd(p, 0) == 2                       # all zero: KSEEK_ERR_INVALID
    p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v = 1, 4, 4, 3, 2, 64, 64
    buf = ctypes.create_string_buffer(64)
    p.q = p.k = p.v = p.o = ctypes.addressof(buf)
    assert lib.fwd(p, 0) == 2                       # heads_q % heads_kv != 0
    p.heads_q, p.head_dim = 4, 584
    assert lib.fwd(p, 0) == 2                       # head_dim > 576 (the wide kernel's limit)
    p.head_dim, p.head_dim_v = 64, 520
    assert lib.fwd(p, 0) == 2                       # head_dim_v > 512
    p.head_dim_v = 64
    p.head_dim, p.out_dtype = 64, abi.FP8_E4M3
    assert lib.fwd(p, 0) == 1                       # fp8 output: KSEEK_ERR_UNSUPPORTED
    assert lib.workspace_bytes(p) == 0


def test_cached_build_hits_and_changed_source_misses(tmp_path):
    src = tmp_path / "tiny.cu"
    src.write_text(TINY % "2.0f")
    cache = tmp_path / "cache"
    a = kb.build(src, cache_dir=cache)
    b = kb.build(src, cache_dir=cache)
    assert a.ok and not a.cached and b.ok and b.cached
    assert b.so_path == a.so_path and b.key == a.key and b.ptxas == a.ptxas and b.log == a.log
    assert (a.so_path.parent / "ptxas.json").is_file() and (a.so_path.parent / "build.log").is_file()
    src.write_text(TINY % "3.0f")
    c = kb.build(src, cache_dir=cache)
    assert c.ok and not c.cached and c.key != a.key and c.so_path != a.so_path
    d = kb.build(src, cache_dir=cache, extra_flags=["-DEXTRA=1"])
    assert d.ok and not d.cached and d.key != c.key
    d.so_path.unlink()                            # a damaged entry is rebuilt in place
    e = kb.build(src, cache_dir=cache, extra_flags=["-DEXTRA=1"])
    assert e.ok and not e.cached and e.so_path == d.so_path and e.so_path.is_file()


STATEFUL = '#include "kseek.h"\ntemplate <int N> int bump() { static int n = 0; return n += N; }\n' \
           'inline int calls = 0;\n' \
           'extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t s) { return KSEEK_ERR_UNSUPPORTED; }\n' \
           'extern "C" int count(void) { ++calls; return bump<1>() * 100 + calls; }\n'


def test_two_builds_in_one_process_keep_their_own_state(tmp_path):
    """Two builds of one source (a variant beside the default) loaded in one process: each keeps its
    function-local statics and inline variables. g++ binds those as STB_GNU_UNIQUE, which the loader
    shares process-wide even under RTLD_LOCAL (the second fa3_hopper build skipped its shared-memory
    opt-in and failed with a cuda error on the GPU); the build flags must keep them per library."""
    src = tmp_path / "stateful.cu"
    src.write_text(STATEFUL)
    a = kb.build(src, cache_dir=tmp_path / "cache", extra_flags=["-DSIDE=1"])
    b = kb.build(src, cache_dir=tmp_path / "cache", extra_flags=["-DSIDE=2"])
    assert a.ok and b.ok and a.so_path != b.so_path, (a.log, b.log)
    la, lb = ctypes.CDLL(str(a.so_path)), ctypes.CDLL(str(b.so_path))
    assert [la.count(), la.count()] == [101, 202]
    assert lb.count() == 101          # shared state would give 303


def test_env_cache_dir_and_header_change(tmp_path, monkeypatch):
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "envcache"))
    (tmp_path / "scale.h").write_text("#define SCALE 2.0f\n")
    src = tmp_path / "withhdr.cu"
    src.write_text('#include "scale.h"\n' + TINY % "SCALE")
    a = kb.build(src)
    assert a.ok and a.so_path.is_relative_to(tmp_path / "envcache")
    assert kb.build(src).cached
    (tmp_path / "scale.h").write_text("#define SCALE 4.0f\n")   # a local header is part of the key
    b = kb.build(src)
    assert b.ok and not b.cached and b.key != a.key


def test_compile_error_is_a_result_not_an_exception(tmp_path):
    src = tmp_path / "broken.cu"
    src.write_text('#include "kseek.h"\n__global__ void k(float* x) { x[0] = undefined_name; }\n')
    cache = tmp_path / "cache"
    r = kb.build(src, cache_dir=cache)
    assert not r.ok and r.so_path is None
    assert "undefined_name" in r.log and "error" in r.log
    assert list(cache.iterdir()) == []            # nothing cached, no temporary left behind


def test_concurrent_builds_share_one_entry(tmp_path):
    src = tmp_path / "race.cu"
    src.write_text(TINY % "5.0f")
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(3) as ex:
        rs = list(ex.map(lambda _: kb.build(src, cache_dir=cache), range(3)))
    assert all(r.ok for r in rs) and len({r.so_path for r in rs}) == 1
    assert [p.name for p in cache.iterdir()] == [rs[0].key]
    assert sorted(p.name for p in rs[0].so_path.parent.iterdir()) == ["build.log", "meta.json", "ptxas.json", "race.so"]


def test_arch_flags_and_missing_nvcc(monkeypatch, tmp_path):
    assert kb.arch_flags("sm_80") == ["-gencode=arch=compute_80,code=sm_80"]
    assert kb.arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(ValueError):
        kb.arch_flags("hopper")
    monkeypatch.setenv("KSEEK_NVCC", str(tmp_path / "no-nvcc-here"))
    with pytest.raises(kb.NvccNotFound, match="KSEEK_NVCC"):
        kb.build(NAIVE, cache_dir=tmp_path)


def test_parse_ptxas_reads_spills():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'
ptxas info    : Function properties for _Z3fooPf
    24 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 24 bytes cumulative stack size, 4096 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function '_Z3barv' for 'sm_80'
ptxas info    : Function properties for _Z3barv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 352 bytes cmem[0]
"""
    assert kb.parse_ptxas(log) == [
        {"kernel": "_Z3fooPf", "arch": "sm_80", "registers": 255, "smem_bytes": 4096, "stack_bytes": 24,
         "spill_stores_bytes": 16, "spill_loads_bytes": 12, "wgmma_serialized": "", "wgmma_waits_injected": 0},
        {"kernel": "_Z3barv", "arch": "sm_80", "registers": 8, "smem_bytes": 0, "stack_bytes": 0,
         "spill_stores_bytes": 0, "spill_loads_bytes": 0, "wgmma_serialized": "", "wgmma_waits_injected": 0},
    ]


def test_parse_ptxas_flags_serialized_wgmma():
    # the lines ptxas 13.0 printed for v11 of fa3_hopper.cu (NOTES: 22-55% slower), names shortened
    log = """ptxas info    : (C7517) warpgroup.wait is injected in around line 396411 by compiler to allow use of registers defined by GMMA in function '_Z4slowv'
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function '_Z4slowv'
ptxas info    : Compiling entry function '_Z4slowv' for 'sm_90a'
ptxas info    : Function properties for _Z4slowv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 240 registers, used 16 barriers
ptxas info    : Compiling entry function '_Z4fastv' for 'sm_90a'
ptxas info    : Used 168 registers, used 16 barriers
ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the function '_Z5spillv'
ptxas info    : Compiling entry function '_Z5spillv' for 'sm_90a'
"""
    slow, fast, spill = kb.parse_ptxas(log)
    assert spill["wgmma_serialized"] == "insufficient register resources" and spill["arch"] == "sm_90a"
    assert slow["kernel"] == "_Z4slowv" and slow["arch"] == "sm_90a" and slow["registers"] == 240
    assert slow["wgmma_serialized"].startswith("non wgmma instructions defining accumulator registers")
    assert slow["wgmma_waits_injected"] == 1
    assert fast["wgmma_serialized"] == "" and fast["wgmma_waits_injected"] == 0
    table = kb.format_ptxas([slow, fast])
    assert "SERIAL" in table.splitlines()[2] and "SERIAL" not in table.splitlines()[3]
    assert "WARNING: ptxas serialized the wgmma of 1 kernel(s)" in table


def test_source_hash(tmp_path):
    f = tmp_path / "x.cu"
    f.write_bytes(b"int x;\n")
    assert kb.source_hash(f) == hashlib.sha256(b"int x;\n").hexdigest()


def test_cli_build(naive, session_cache, capsys, tmp_path):
    assert cli_main(["build", str(NAIVE), "--cache-dir", str(session_cache)]) == 0
    out = capsys.readouterr().out
    assert "cached" in out and "naive_fwd_kernel<" in out and "constraints (binary): ok" in out
    assert cli_main(["build", str(FIXTURES / "calls_cublas.cu"), "--cache-dir", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "REFUSED" in out and "cublasCreate_v2" in out
    broken = tmp_path / "broken.cu"
    broken.write_text("this is not C++\n")
    assert cli_main(["build", str(broken), "--cache-dir", str(tmp_path)]) == 3
    assert "BUILD FAILED" in capsys.readouterr().out
    assert cli_main(["build", str(tmp_path / "missing.cu")]) == 2

