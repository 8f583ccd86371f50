"""The run-time code check without a GPU: the CUPTI shim compiles and loads, its cubin parser agrees
with an independent one (pyelftools) on real nvcc builds, relocated instructions are masked, the
candidate's cubins are found in its .so (compressed fatbins too), and `judge` refuses every launch
whose code is not the candidate's, whatever its name. The launch and module records themselves
come from CUPTI on the GPU (tests/gpu/test_adversarial_gpu.py, tools/gpu_trust.sh)."""
import ctypes
import subprocess
from pathlib import Path

import pytest

from kernelseek import build as kb
from kernelseek import cubins, runcheck
from kernelseek.runcheck import Launch, Module, judge

REPO = Path(__file__).resolve().parents[2]
NAIVE = REPO / "kernels" / "naive_fwd.cu"
CONTROL = REPO / "tests" / "adversarial" / "control_honest.cu"

RELOC_SRC = r'''
#include "kseek.h"
#include <cstdio>
__device__ int counter;                       // a global: its address is relocated into the code
__constant__ float table[4] = {1.f, 2.f, 3.f, 4.f};
__global__ void bump(float* out) { int c = atomicAdd(&counter, 1); out[c & 3] = table[c & 3]; printf("%d\n", c); }
extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t s) { bump<<<1, 1, 0, s>>>((float*)p->o); return 0; }
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "kseek-build-cache"


@pytest.fixture(scope="module")
def shim(cache):
    path = runcheck.build_shim(cache)
    lib = ctypes.CDLL(str(path))
    lib.kt_function_table.restype = ctypes.c_void_p
    lib.kt_free.argtypes = [ctypes.c_void_p]
    return lib


@pytest.fixture(scope="module")
def sos(cache, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reloc")
    src = d / "reloc_kernel.cu"
    src.write_text(RELOC_SRC)
    out = {}
    for f in (NAIVE, CONTROL, src):
        r = kb.build(f, cache_dir=cache, extra_flags=("-I", str(kb.REPO_KERNELS)))
        assert r.ok, r.log[-2000:]
        out[f.stem] = r.so_path
    return out


def c_table(lib, img: bytes) -> tuple[list[str], dict[str, str]]:
    p = lib.kt_function_table(img, len(img))
    try:
        lines = ctypes.string_at(p).decode().splitlines()
    finally:
        lib.kt_free(p)
    return lines[0].split(), {ln.split(" ", 4)[4]: ln.split()[1] for ln in lines[1:]}


def test_the_shim_builds_once_and_loads_without_a_gpu(cache, shim):
    again = runcheck.build_shim(cache)
    assert again.is_file() and again.name.startswith("kseek_trust-")
    for fn in ("kt_start", "kt_window", "kt_take_launches", "kt_take_modules", "kt_activity_start",
               "kt_activity_stop", "kt_function_table"):
        assert hasattr(shim, fn), fn
    assert shim.kt_started() == 0


def test_without_a_driver_the_monitor_says_why(cache):
    if Path("/usr/lib/x86_64-linux-gnu/libcuda.so.1").exists():
        pytest.skip("this machine has a CUDA driver")
    with pytest.raises((RuntimeError, FileNotFoundError)) as e:
        runcheck.Monitor.start(runcheck.build_shim(cache))
    assert "libcuda" in str(e.value) or "libcupti" in str(e.value)


def test_c_and_python_cubin_parsers_agree_on_real_builds(shim, sos):
    n = 0
    for name, so in sos.items():
        for img in cubins.extract_cubins(so):
            head, c_kernels = c_table(shim, img)
            py = cubins.kernel_table(img)
            assert head[1] == py.sha256 and int(head[2]) == py.size, name
            assert head[4] == py.names_sha256 and int(head[3]) == len(py.kernels), name
            assert c_kernels == py.kernels, name
            n += len(py.kernels)
    assert n >= 10      # naive: 6 dtype combinations; control: 4; reloc: 1


def test_relocations_are_masked_alike_in_c_and_python(shim, sos):
    """sm_90 code reaches globals through constant bank 4, whose relocations patch data, not code, so
    the loaded code is the embedded code. Where a relocation does target code, both parsers zero the
    16-byte instructions it patches: pointed at the kernel's .text here, by rewriting the sh_info of
    the cubin's .rela.nv.constant4 header."""
    import hashlib
    import io
    import struct
    from elftools.elf.elffile import ELFFile
    img = bytearray(max(cubins.extract_cubins(sos["reloc_kernel"]), key=len))
    elf = ELFFile(io.BytesIO(bytes(img)))
    secs = list(elf.iter_sections())
    text = next(i for i, x in enumerate(secs) if x.name == ".text._Z4bumpPf")
    rel = next(i for i, x in enumerate(secs) if x.name == ".rela.nv.constant4")
    assert all(x["sh_info"] != text for x in secs if x["sh_type"] in ("SHT_REL", "SHT_RELA"))
    plain = cubins.kernel_table(bytes(img)).kernels["_Z4bumpPf"]
    assert plain == hashlib.sha256(secs[text].data()).hexdigest()            # nothing to mask
    offs = sorted({r["r_offset"] & ~15 for r in secs[rel].iter_relocations()})
    assert offs and secs[text].data()[offs[0]:offs[0] + 16] != bytes(16)
    struct.pack_into("<I", img, elf["e_shoff"] + rel * elf["e_shentsize"] + 44, text)
    masked = cubins.kernel_table(bytes(img)).kernels["_Z4bumpPf"]
    _, c_kernels = c_table(shim, bytes(img))
    assert masked != plain and c_kernels["_Z4bumpPf"] == masked
    code = bytearray(secs[text].data())
    for o in offs:
        code[o:o + 16] = bytes(16)
    assert masked == hashlib.sha256(bytes(code)).hexdigest()


def test_the_candidates_cubins_are_found_in_its_so(sos):
    own = cubins.own_code(sos["naive_fwd"])
    assert len(own.cubins) == 2                    # nvcc puts two fatbins in the .so: both are its own
    names = {n for c in own.cubins.values() for n in c.kernels}
    assert len(names) == 10 and all("naive_fwd_kernel" in n or "naive_wide_kernel" in n for n in names)
    cached = sos["naive_fwd"].with_name(sos["naive_fwd"].name + ".owncode.json")
    assert cached.is_file() and cubins.own_code(sos["naive_fwd"]).kernel_code == own.kernel_code


def test_a_compressed_fatbin_is_read_through_cuobjdump(tmp_path):
    from kernelseek.profile import find_tool
    if not find_tool("cuobjdump"):
        pytest.skip("no cuobjdump")
    outs = {}
    for mode in ("none", "compressed"):
        so = tmp_path / f"naive_{mode}.so"
        flags = ["-Xfatbin", "-compress-all"] if mode == "compressed" else ["-Xfatbin", "-compress=false"]
        r = subprocess.run([kb.find_nvcc(), "-O1", "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared",
                            "-gencode=arch=compute_90a,code=sm_90a", *flags, "-I", str(kb.REPO_KERNELS),
                            str(NAIVE), "-o", str(so)], capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        outs[mode] = so
    elves, compressed = cubins.fatbin_elves(outs["compressed"])
    assert compressed >= 1
    a = {k for img in cubins.extract_cubins(outs["compressed"]) for k in cubins.kernel_table(img).kernels.values()}
    b = {k for img in cubins.extract_cubins(outs["none"]) for k in cubins.kernel_table(img).kernels.values()}
    assert a == b and len(a) == 10                 # 6 naive_fwd_kernel + 4 naive_wide_kernel


# ---- judge: attribution by code -------------------------------------------------------------------
def L(name, sig="-", api="cuLaunchKernel", window=True, other=False, ret=0):
    return Launch(1, window, other, "drv", api, "0x1", "0x2", sig, ret, name)


@pytest.fixture(scope="module")
def world(shim, sos):
    """Loaded modules as the shim would record them: the candidate's (naive) and a foreign one."""
    mods = {}
    for i, key in enumerate(("naive_fwd", "control_honest"), 1):
        img = max(cubins.extract_cubins(sos[key]), key=len)
        p = shim.kt_function_table(img, len(img))
        text = ctypes.string_at(p).decode()
        shim.kt_free(p)
        head, rest = text.split("\n", 1)
        f = head.split()
        runcheck.parse_modules(f"M {i} {f[1]} {f[2]} {f[3]} {f[4]} 0\n{rest}", mods)
    own = cubins.own_code(sos["naive_fwd"])
    return mods, own


def test_the_candidates_own_kernels_pass(world):
    mods, own = world
    launches = [L(n, mods[1].names_sha256) for n in mods[1].kernels] + [L(next(iter(mods[1].kernels)))]
    assert judge(launches, mods, own) == []


def test_a_foreign_kernel_is_refused_naming_it(world):
    mods, own = world
    name = next(iter(mods[2].kernels))
    reasons = judge([L(name, mods[2].names_sha256)], mods, own)
    assert len(reasons) == 1 and name[:60] in reasons[0] and "ran during its call" in reasons[0]
    assert "its code is not in the candidate binary" in reasons[0] and f"{mods[2].size:,} bytes" in reasons[0]


def test_a_foreign_cubin_under_the_candidates_kernel_name_is_refused(world):
    """A vendor cubin loaded under a new name: the name is the candidate's, the code is not."""
    mods, own = world
    mine = next(iter(mods[1].kernels))
    fake = Module(3, "f" * 64, 12345, "e" * 64, {mine: next(iter(mods[2].kernels.values()))})
    world_ = {**mods, 3: fake}
    r = judge([L(mine, "e" * 64)], world_, own)                  # the launch's module is the fake one
    assert r and "not in the candidate binary" in r[0] and "12,345 bytes" in r[0]
    r = judge([L(mine, "-")], world_, own)                       # module unknown: two codes, one name
    assert r and r[0].split(": ", 1)[1].startswith("ambiguous")


def test_graphs_unknown_modules_threads_and_failed_launches(world):
    mods, own = world
    r = judge([L("?", api="cuGraphLaunch")], mods, own)
    assert r and "CUDA graph" in r[0]
    r = judge([L("_Z6cheatv")], mods, own)
    assert r and "never seen loading" in r[0]
    other = judge([L(next(iter(mods[2].kernels)), window=False, other=True)], mods, own)
    assert other and "from another thread" in other[0]
    assert judge([L(next(iter(mods[2].kernels)), window=False)], mods, own) == []   # the harness's own
    assert judge([L("_Z6cheatv", ret=1)], mods, own) == []                          # did not launch
    assert judge([L("?", api="cuLaunchHostFunc")], mods, own) == []


def test_a_module_without_recorded_code_is_attributed_by_its_name_set_only_when_it_is_ours(world):
    """Where the driver gave CUPTI no cubin, a launch whose module's kernel-name set is exactly one of
    the candidate's cubins' passes, counted as weaker (by_names); any other set is refused."""
    mods, own = world
    mine = next(iter(mods[1].kernels))
    only = {k: v for k, v in mods.items() if k != 1}          # the candidate's module left unrecorded
    launch = L(mine, mods[1].names_sha256)
    assert judge([launch], only, own) == [] and runcheck.by_names([launch], only, own) == 1
    assert judge([L(mine, "0" * 64)], only, own)                 # another name set: refused
    assert runcheck.by_names([launch], mods, own) == 0            # recorded code: the strong check


def test_the_c_parser_reads_a_whole_fatbin(shim, sos):
    """If the driver hands CUPTI the fatbin instead of the cubin, its ELF entries are parsed."""
    from elftools.elf.elffile import ELFFile
    with sos["naive_fwd"].open("rb") as f:
        fat = ELFFile(f).get_section_by_name(".nv_fatbin").data()
    head, c_kernels = c_table(shim, fat)
    py = {}
    for img in cubins.extract_cubins(sos["naive_fwd"]):
        py.update(cubins.kernel_table(img).kernels)
    assert head[-1] == "0" and c_kernels == py and len(py) == 10


def test_launch_and_module_text_round_trip():
    text = ("L 7 1 0 drv 307 cuLaunchKernel 0x5 0x6 " + "a" * 64 + " 3 0 42 _Z1kv\n"
            "L 8 0 1 rt 211 cudaLaunchKernel_v7000 (nil) (nil) - 0 0 43 _Z1k with space\n")
    ls = runcheck.parse_launches(text)
    assert [(x.seq, x.in_window, x.other_thread, x.domain, x.api, x.module_sig, x.ret, x.name) for x in ls] == [
        (7, True, False, "drv", "cuLaunchKernel", "a" * 64, 0, "_Z1kv"),
        (8, False, True, "rt", "cudaLaunchKernel_v7000", "-", 0, "_Z1k with space")]
    mods = runcheck.parse_modules("M 4 " + "b" * 64 + " 100 1 " + "c" * 64 + " 0\nF " + "d" * 64 + " 64 16 _Z1kv\nU 4\n", {})
    assert mods[4].kernels == {"_Z1kv": "d" * 64} and mods[4].unloaded and mods[4].size == 100
