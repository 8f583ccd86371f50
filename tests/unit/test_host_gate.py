"""The host-code gate (kernelseek/host_gate.py) on libraries built by the real nvcc: the adversarial
kernels that forge replies or patch the harness are refused naming what they use; naive_fwd.cu,
fa3_hopper and every honest adversarial kernel pass; small sources show each rule's edge."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelseek import build as kb
from kernelseek import host_gate as H
from kernelseek.constraints import check_binary

REPO = Path(__file__).resolve().parents[2]
ADV = REPO / "tests" / "adversarial"
ATTACKS = {  # adversarial kernel -> what its refusal must name
    "forge_reply": "imports write (from libc.so.6)",
    "patch_python": "imports dlsym (from libc.so.6)",
    "raw_syscall": "`syscall` instruction",
    "load_ctor": ".init_array runs",
    "stdio_fd": "imports stdout (from libc.so.6)",
    "python_escape": "imports PyRun_SimpleString (from no versioned library)",
    "blas_dlopen": "imports dlopen",
}
SMALL = {  # name -> source; each is one rule's edge
    "allowed_host": """
        #include <cstdio>
        #include <cstdlib>
        #include <cstring>
        #include <cmath>
        #include <vector>
        #include <string>
        #include <stdexcept>
        __global__ void k(float* x) { x[threadIdx.x] = 1.f; }
        extern "C" int kseek_fwd(float* x, int n) {
          std::vector<float> h(n);
          std::string s = "n=" + std::to_string(n);
          if (n < 0) throw std::runtime_error(s);
          float* d = (float*)malloc(16); memset(d, 0, 16); free(d);
          printf("%s %f\\n", s.c_str(), sqrtf((float)n));
          k<<<1, 32>>>(x);
          return cudaGetLastError() == cudaSuccess ? 0 : (int)h.size();
        }""",
    "hidden_syscall": """
        extern "C" int kseek_fwd(void) {
          int r;  // mov $0x050f, %eax: the bytes 0f 05 (syscall) inside another instruction
          asm volatile(".byte 0xb8, 0x0f, 0x05, 0x00, 0x00\\n\\tmov %%eax, %0" : "=r"(r) : : "eax");
          return r;
        }""",
    "wx_section": """
        asm(".section .wxcode,\\"awx\\",@progbits\\n.byte 0xc3\\n.previous");
        extern "C" int kseek_fwd(void) { return 0; }""",
    "thread_start": """
        #include <pthread.h>
        static void* run(void*) { return nullptr; }
        extern "C" int kseek_fwd(void) { pthread_t t; return pthread_create(&t, nullptr, run, nullptr); }""",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    cache = tmp_path_factory.getbasetemp() / "kseek-build-cache"      # shared with the other build tests
    src_dir = tmp_path_factory.mktemp("gate_src")
    srcs = [REPO / "kernels" / "fa3_hopper", REPO / "kernels" / "naive_fwd.cu"]
    srcs += [ADV / f"{n}.cu" for n in ATTACKS] + [ADV / "control_honest.cu", ADV / "memo_host.cu"]
    for name, text in SMALL.items():
        (src_dir / f"{name}.cu").write_text(text)
        srcs.append(src_dir / f"{name}.cu")
    with ThreadPoolExecutor(2) as ex:
        res = list(ex.map(lambda f: kb.build(f, cache_dir=cache), srcs))
    for f, r in zip(srcs, res):
        assert r.ok, (f, r.log[-1500:])
    return {Path(f).stem: r.so_path for f, r in zip(srcs, res)}


@pytest.mark.parametrize("name", ["naive_fwd", "fa3_hopper", "control_honest", "memo_host", "allowed_host"])
def test_clean_libraries_pass(built, name):
    assert H.check(built[name]) == []


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_refused_naming_what_it_uses(built, name):
    reasons = H.check(built[name])
    assert reasons and all(r.startswith("host-code gate: ") for r in reasons)
    assert any(ATTACKS[name] in r for r in reasons), reasons
    assert not check_binary(built[name]).ok                 # and so the build step refuses it


def test_syscall_bytes_inside_another_instruction_pass_the_gate_but_are_found(built, tmp_path, monkeypatch):
    """0f 05 as a mov immediate: no syscall instruction in the disassembly, so the gate passes it (the
    worker's seccomp filter stops a jump into it: test_syscall_filter.py); syscall_sites, which the worker
    uses where it cannot install that filter, finds the bytes. Without objdump the gate refuses them."""
    so = built["hidden_syscall"]
    assert H.check(so) == [] and H.decoded_syscalls(so) == []
    assert [(insn, sec) for _, insn, sec in H.syscall_sites(so)] == [("syscall", ".text")]
    monkeypatch.setenv("PATH", str(tmp_path))                  # a PATH without objdump
    reasons = H.check(so)
    assert len(reasons) == 1 and "`syscall` instruction" in reasons[0] and "objdump not found" in reasons[0]


def test_writable_executable_code_and_thread_starts_are_refused(built):
    assert any("writable and executable" in r for r in H.check(built["wx_section"]))
    r = H.check(built["thread_start"])
    assert any("imports pthread_create" in x and "outlive the call" in x for x in r), r


def test_the_load_time_rule_names_both_extra_initializers(built):
    (r,) = [x for x in H.check(built["load_ctor"]) if ".init_array" in x]
    assert "adv_at_load" in r and "_GLOBAL__sub_I_" in r and "frame_dummy" in r


def test_allowlist_rules():
    assert H.import_allowed("cudaLaunchKernelExC", "libcudart.so.13", False)
    assert H.import_allowed("cuTensorMapEncodeTiled", "libcuda.so.1", False)
    assert H.import_allowed("memcpy", "libc.so.6", False) and H.import_allowed("expf", "libm.so.6", False)
    assert H.import_allowed("_Znwm", "libstdc++.so.6", False)
    assert H.import_allowed("__gmon_start__", None, True)
    assert not H.import_allowed("__gmon_start__", None, False)          # only as the weak crt hook
    assert not H.import_allowed("cudaMalloc", None, False)              # unversioned: from anywhere
    assert not H.import_allowed("memcpy", "libfoo.so.1", False)         # another library's memcpy
    for name in ("write", "open", "fwrite", "stdout", "dlsym", "mprotect", "fork", "syscall", "getenv",
                 "_ZNSolsEi", "PyRun_SimpleString"):
        assert not H.import_allowed(name, "libc.so.6", False), name
    assert H.danger("PyGILState_Ensure") and H.danger("clone") and H.danger("dup2")
    for name in ("cudaLaunchHostFunc", "cudaStreamAddCallback", "cudaLaunchHostFunc_ptsz"):
        assert not H.import_allowed(name, "libcudart.so.13", False) and "CUDA's thread" in H.danger(name)
    assert not H.import_allowed("cuLaunchHostFunc", "libcuda.so.1", False)


def test_an_unreadable_library_is_one_reason(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_bytes(b"not an elf")
    (r,) = H.check(bad)
    assert "not a readable ELF library" in r
