"""The worker's run-time guard on a candidate library: no system call from the candidate's own code.

The host-code gate (host_gate.py) refuses a library that imports a way to reach the kernel, and a
`syscall`/`sysenter`/`int 0x80` instruction it can find by disassembling. Bytes of such an instruction
can still sit inside another instruction (honest code holds them by chance, in a displacement or an
immediate) and be reached by a jump into its middle. So, once the worker has loaded a candidate (its
load runs none of its code: the gate allows no constructors), it installs a seccomp filter on every
thread of the process that kills the process when a system call's instruction pointer lies in the
library's executable mappings. Calls into libc and the CUDA libraries are unaffected (their system
calls come from their own pages); a candidate that makes one itself dies with SIGSYS, which the parent
records as a crashed row. Linux x86-64 only; `forbid(path)` says why when it cannot install the filter.
A process the worker starts afterwards (nvidia-smi for a meta request) inherits the filter; its own
code lands elsewhere (ASLR), so only a chance overlap with those few pages could stop it, and the
worker already treats such a helper's failure as "unavailable".
"""
from __future__ import annotations

import ctypes
import os
import platform

PR_SET_NO_NEW_PRIVS = 38
SYS_SECCOMP = 317                  # x86-64
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1      # every thread of the process, not only the caller
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000
# BPF opcodes: ld word at an absolute offset of struct seccomp_data; jeq/jge with a constant; ja; ret
LD_W_ABS, JEQ_K, JGE_K, JA, RET_K = 0x20, 0x15, 0x35, 0x05, 0x06
IP_LO, IP_HI = 8, 12               # seccomp_data.instruction_pointer, little-endian halves

_DONE: dict[str, str] = {}         # realpath -> the note of the filter installed for it


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn))]


def text_ranges(path: str | os.PathLike, maps: str = "/proc/self/maps") -> list[tuple[int, int]]:
    """[lo, hi) of the executable mappings of the file at `path` in this process."""
    real = os.path.realpath(path)
    out = []
    with open(maps) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1] and parts[5].strip() == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out


def program(ranges: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """The BPF program (code, jt, jf, k): kill when the instruction pointer is in any range, else allow.
    A range is split at 4 GiB boundaries so that each piece has one high word."""
    pieces = []
    for lo, hi in ranges:
        while lo < hi:
            end = min(hi, (lo >> 32) + 1 << 32)
            pieces.append((lo, end))
            lo = end
    insns = []
    n = len(pieces)
    for i, (lo, hi) in enumerate(pieces):
        to_kill = 5 * (n - i - 1) + 1          # from the piece's last insn: past the rest, past ret ALLOW
        top = hi & 0xFFFFFFFF                  # 0: the piece runs to the end of its high word
        insns += [(LD_W_ABS, 0, 0, IP_HI),
                  (JEQ_K, 0, 3, lo >> 32),                     # another high word: next piece
                  (LD_W_ABS, 0, 0, IP_LO),
                  (JGE_K, 0, 1, lo & 0xFFFFFFFF),              # below lo: next piece
                  (JGE_K, 0, to_kill, top) if top else (JA, 0, 0, to_kill)]   # below hi: kill
    return insns + [(RET_K, 0, 0, RET_ALLOW), (RET_K, 0, 0, RET_KILL_PROCESS)]


def forbid(path: str | os.PathLike) -> str:
    """Install the filter for the loaded library at `path` (once per library and process). Returns a
    note ("on: ..."); raises OSError saying why it could not."""
    real = os.path.realpath(path)
    if real in _DONE:
        return _DONE[real]
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise OSError(f"seccomp filter: only on Linux x86-64, not {platform.system()} {platform.machine()}")
    ranges = text_ranges(real)
    if not ranges:
        raise OSError(f"seccomp filter: {real} has no executable mapping in this process (not loaded?)")
    if any(hi - lo > 0xFFFFFFFF for lo, hi in ranges):
        raise OSError("seccomp filter: an executable mapping larger than 4 GiB")
    insns = program(ranges)
    if len(insns) > 4096 or any(j > 255 for _, jt, jf, _ in insns for j in (jt, jf)):
        raise OSError(f"seccomp filter: too many mappings ({len(ranges)})")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(f"seccomp filter: prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
    arr = (_Insn * len(insns))(*[_Insn(*x) for x in insns])
    prog = _Prog(len(insns), arr)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(SYS_SECCOMP), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                    ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog)) != 0:
        raise OSError(f"seccomp filter: seccomp(SET_MODE_FILTER, TSYNC): {os.strerror(ctypes.get_errno())}")
    note = f"on: system calls from {len(ranges)} executable mapping(s) of {os.path.basename(real)} kill the worker"
    _DONE[real] = note
    return note
