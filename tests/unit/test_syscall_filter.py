"""The worker's run-time guard (kernelseek/syscall_filter.py): once a candidate is loaded, a system call made
from its own pages kills the worker, wherever the instruction's bytes sit. The attack here hides a `syscall`
inside a `mov` immediate and jumps into its middle: the host-code gate (which disassembles) does not see an
instruction there, and the filter is what stops it. Real library (gcc), real processes, real seccomp."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import host_gate as H
from kernelseek import syscall_filter as F

REPO = Path(__file__).resolve().parents[2]

# hidden_write(): write(1, "hidden\n", 7) by a syscall whose bytes are the immediate of `mov $imm, %eax`
# (b8 0f 05 eb 00: linear disassembly sees one mov; a jump to its second byte runs 0f 05 = syscall,
# then eb 00 = jmp +0, back in step). libc_write(): the same through libc (its own pages).
SRC = r"""
#include <unistd.h>
long hidden_write(void) {
  static const char msg[] = "hidden\n";
  long ret;
  asm volatile("lea 1f+1(%%rip), %%r8\n\t"
               "mov $1, %%eax\n\t"
               "jmp *%%r8\n\t"
               "1: .byte 0xb8, 0x0f, 0x05, 0xeb, 0x00\n\t"
               : "=a"(ret) : "D"(1L), "S"(msg), "d"(7L) : "rcx", "r8", "r11", "memory");
  return ret;
}
long libc_write(void) { return write(1, "libc\n", 5); }
"""

RUN = r"""
import ctypes, sys
from kernelseek import worker
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[2] == "filter":
    out = {}
    print("allowed" if worker._forbid_syscalls(sys.argv[1], out) else "refused", out.get("syscall_filter"), flush=True)
lib.libc_write()
lib.hidden_write()
print("survived", flush=True)
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sysfilter")
    (d / "hidden.c").write_text(SRC)
    so = d / "libhidden.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(so), str(d / "hidden.c")], check=True)
    return so


def _run(lib: Path, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, str(lib), mode], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_the_gate_sees_bytes_but_no_instruction(lib):
    assert any(insn == "syscall" for _, insn, _ in H.syscall_sites(lib))   # 0f 05 inside the mov
    assert H.decoded_syscalls(lib) == []                                       # no syscall instruction
    assert not [r for r in H.check(lib) if "syscall" in r]                      # so the gate lets it pass


def test_without_the_filter_the_hidden_syscall_runs(lib):
    p = _run(lib, "none")
    assert p.returncode == 0 and p.stdout.split() == ["libc", "hidden", "survived"], (p.stdout, p.stderr)


def test_with_the_filter_libc_works_and_the_hidden_syscall_kills_the_worker(lib):
    p = _run(lib, "filter")
    assert p.returncode == -signal.SIGSYS, (p.returncode, p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("allowed on: system calls from") and lines[1:] == ["libc"], lines


def test_filter_program_kills_only_inside_the_ranges():
    """The BPF program run by hand (a tiny interpreter of its five opcodes) on instruction pointers
    around two ranges, one of them crossing a 4 GiB boundary."""
    ranges = [(0x7F00_0000_1000, 0x7F00_0000_3000), (0x1_FFFF_F000, 0x2_0000_2000)]
    prog = F.program(ranges)

    def run(ip: int) -> int:
        data = {F.IP_LO: ip & 0xFFFFFFFF, F.IP_HI: ip >> 32}
        pc, acc = 0, 0
        while True:
            code, jt, jf, k = prog[pc]
            if code == F.LD_W_ABS:
                acc, pc = data[k], pc + 1
            elif code == F.JEQ_K:
                pc += 1 + (jt if acc == k else jf)
            elif code == F.JGE_K:
                pc += 1 + (jt if acc >= k else jf)
            elif code == F.JA:
                pc += 1 + k
            else:
                return k
    inside = [0x7F00_0000_1000, 0x7F00_0000_2FFF, 0x1_FFFF_F000, 0x1_FFFF_FFFF, 0x2_0000_0000, 0x2_0000_1FFF]
    outside = [0x7F00_0000_0FFF, 0x7F00_0000_3000, 0x1_FFFF_EFFF, 0x2_0000_2000, 0x7F01_0000_1000, 0]
    assert all(run(ip) == F.RET_KILL_PROCESS for ip in inside)
    assert all(run(ip) == F.RET_ALLOW for ip in outside)
