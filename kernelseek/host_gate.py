"""The host-code gate: what a candidate library's CPU code may reach, read from the built .so
before it is ever loaded.

The candidate's host code runs inside the worker process, beside the harness that checks and times
it and writes the reply. Code that can call `write`, `dlsym`, `PyRun_SimpleString` or a raw
`syscall` there can forge the reply or patch the harness. So a library is refused (one reason per
finding, naming it) unless:
  - every undefined dynamic symbol comes from the allowlist below, bound by its symbol version to
    the library it belongs to: the CUDA runtime and driver (all but the host callbacks,
    cudaLaunchHostFunc and cudaStreamAddCallback, which run the candidate's code on CUDA's thread
    after its call returned),
    nvcc's registration calls, libc/libm memory, string, math and stdout-only printf, the C++
    runtime bits nvcc and the containers emit. Refused by omission: dlopen/dlsym, every Py*/_Py*,
    file and socket I/O (open, write, read, fopen, fwrite, stdout/stderr objects: a copied FILE
    with another fd number writes anywhere), processes and threads (fork, clone, pthread_create),
    memory mapping (mmap, mprotect), signals, prctl, ptrace, syscall, getenv;
  - its dependencies (DT_NEEDED) are those libraries only, with no RPATH/RUNPATH (a library of the
    same name from another folder) and no text relocations (the loader writing into code);
  - objdump's disassembly of its executable sections holds no system-call instruction (syscall,
    sysenter, int 0x80; without objdump: not even their bytes, 0f 05, 0f 34, cd 80, at any offset).
    The same bytes inside another instruction (honest code holds them by chance, in a displacement
    or an immediate) pass here: a jump into the middle of that instruction would execute them, so the
    worker kills any system call made from the candidate's pages (syscall_filter.py), and refuses a
    library holding such bytes where it cannot install that filter;
  - no segment is writable and executable at once (code written at run time), nor the stack executable;
  - its load-time code is nvcc's: .init_array holds exactly frame_dummy and nvcc's
    __sti____cudaRegisterAll, .fini_array __do_global_dtors_aux, DT_INIT/DT_FINI _init/_fini, and
    there is no .preinit_array, .ctors or .dtors (a constructor or a global object's initializer is
    refused: nothing of the candidate runs before the harness calls it).
What it cannot see: code that finds libc through the addresses of allowed functions (their GOT
entries) and walks libc's symbol table in memory to call what it was refused; a driver function
fetched by name at run time (cudaGetDriverEntryPoint, which fa3_hopper needs for its TMA
descriptors), cuLaunchHostFunc included. The worker's reply
protocol and the parent's wall-clock check (protocol.py, corroborate.py) bound what that buys.
"""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

# Dependencies a candidate may have (DT_NEEDED), by the start of their soname.
NEEDED = ("libcudart.so.", "libcuda.so.", "libstdc++.so.", "libgcc_s.so.", "libc.so.", "libm.so.",
          "ld-linux-x86-64.so.")

_LIBC = set("""
memcpy memmove memset memcmp memchr strlen strnlen strcmp strncmp strchr strrchr strstr strcpy strncpy
strcat strncat strtol strtoul strtoll strtoull strtod strtof atoi atol atof abs labs llabs qsort bsearch
malloc calloc realloc free posix_memalign aligned_alloc memalign
abort exit _exit __assert_fail __stack_chk_fail __memcpy_chk __memmove_chk __memset_chk __strcpy_chk __strcat_chk
printf vprintf puts putchar __printf_chk __vprintf_chk
snprintf sprintf vsnprintf vsprintf __sprintf_chk __snprintf_chk __vsnprintf_chk __vsprintf_chk
__cxa_atexit __cxa_finalize __cxa_thread_atexit_impl __errno_location
pthread_mutex_lock pthread_mutex_unlock pthread_mutex_trylock pthread_once __tls_get_addr
""".split())
# libm (and the same names when glibc serves them from libc): the C math functions, f/l variants too.
_MATH = re.compile(r"^(a?(sin|cos|tan)h?|atan2|exp(2|10|m1)?|log(2|10|1p|b)?|pow|sqrt|cbrt|fabs|floor|ceil|"
                   r"trunc|l?l?round|l?l?rint|nearbyint|fmod|remainder|remquo|fmin|fmax|fma|fdim|ldexp|frexp|"
                   r"modf|hypot|erfc?|tgamma|lgamma|copysign|nextafter|scalbl?n|ilogb|sincos)[fl]?$")
# The C++ runtime (libstdc++, libgcc_s): exception handling, operator new/delete, std::string and the
# containers' out-of-line helpers, standard exceptions' typeinfo and members. No streams, no files.
_CXX = re.compile(r"^(__cxa_\w+|__gxx_personality_v0|_Unwind_\w+|__gcc_personality_v0|"
                  r"_Zn[wa]m\w*|_Zd[la]Pv\w*|_ZSt9terminatev|_ZSt\d+__throw_\w+|_ZSt\d+_Rb_tree_\w+|"
                  r"_ZNSt8__detail15_List_node_base\w+|_ZNKSt8__detail20_Prime_rehash_policy\w+|"
                  r"_ZN?K?St7__cxx1112basic_string\w+|_ZNKSt7__cxx1112basic_string\w+|"
                  r"_ZT[ISV](St\d*[a-z_]+|N10__cxxabiv1\w+|N9__gnu_cxx\w+)|"
                  r"_ZN?K?St\d+(bad_alloc|bad_array_new_length|exception|logic_error|runtime_error|"
                  r"length_error|out_of_range|invalid_argument|domain_error|overflow_error)\w*|"
                  r"_ZNSt9exception\w+|_ZNKSt9exception\w+)$")
# CUDA calls that run host code of the candidate's on CUDA's own thread, after its call returned.
_HOST_CALLBACK = re.compile(r"^(cudaLaunchHostFunc|cudaStreamAddCallback|cuLaunchHostFunc|cuStreamAddCallback)(_\w+)?$")
_WEAK_UNVERSIONED = {"_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__gmon_start__"}

# What a refused import is for (the first match names the danger in the reason).
_DANGER = [(_HOST_CALLBACK, "runs the candidate's host code on CUDA's thread after its call returned"),
           (re.compile(r"^(dl(open|mopen|sym|vsym|info|_iterate_phdr)|_dl_\w+)$"), "loads or finds code at run time"),
           (re.compile(r"^_?Py|^_ZN2at|^_ZN3c10|^_ZN5torch"), "reaches the Python interpreter or libtorch"),
           (re.compile(r"^(syscall|ptrace|prctl|seccomp|kill|tgkill|raise|signal|sigaction)$"), "system calls, signals"),
           (re.compile(r"^(fork|vfork|clone3?|execv?\w*|system|popen|posix_spawn\w*|pthread_create|"
                       r"thrd_create|std::thread|_ZNSt6thread\w+)$"), "starts threads or processes that outlive the call"),
           (re.compile(r"^(mmap|mmap64|mprotect|munmap|mremap|pkey_\w+|memfd_create)$"), "maps or re-protects memory"),
           (re.compile(r"^(open|open64|openat|creat|write|writev|pwrite\w*|read|readv|pread\w*|send\w*|"
                       r"recv\w*|socket|connect|dup[23]?|close|fopen\w*|fdopen|freopen|fwrite|fputs|fputc|"
                       r"fprintf|vfprintf|__fprintf_chk|fflush|stdout|stderr|stdin|_IO_\w+|getenv|secure_getenv|"
                       r"ioctl|fcntl)$"), "files, pipes, sockets or the environment")]
SYSCALL_BYTES = {b"\x0f\x05": "syscall", b"\x0f\x34": "sysenter", b"\xcd\x80": "int 0x80"}
_INIT_OK = {"frame_dummy": 1, "_ZL24__sti____cudaRegisterAllv": 1}
_FINI_OK = {"__do_global_dtors_aux": 1}
_SHOWN = 8                                     # findings named per kind; the rest counted


def import_allowed(name: str, lib: str | None, weak: bool) -> bool:
    """Whether an undefined symbol `name`, bound by its version to library `lib` (None:
    unversioned), may be imported (see the module docstring)."""
    if lib is None:
        return weak and name in _WEAK_UNVERSIONED
    if lib.startswith(("libcudart.so.", "libcuda.so.")):
        return not _HOST_CALLBACK.match(name)
    if lib.startswith(("libc.so.", "libm.so.", "ld-linux")):
        return name in _LIBC or bool(_MATH.match(name))
    if lib.startswith(("libstdc++.so.", "libgcc_s.so.")):
        return bool(_CXX.match(name)) or name in _LIBC
    return False


def danger(name: str) -> str:
    """Why an import is dangerous, for the reason (empty when it is merely not on the list)."""
    for pat, why in _DANGER:
        if pat.match(name):
            return why
    return ""


def check(so_path: str | Path) -> list[str]:
    """The reasons to refuse the library at `so_path` (empty: it passes). Never raises."""
    path = Path(so_path)
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            return (_imports(elf) + _dynamic(elf) + _syscalls(elf, path) + _segments(elf)
                    + _load_time_code(elf))
    except (OSError, ELFError, ValueError, KeyError, struct.error) as e:
        return [f"host-code gate: {path.name}: not a readable ELF library ({type(e).__name__}: {e})"]


def _capped(items: list[str], what: str) -> list[str]:
    return items[:_SHOWN] + ([f"host-code gate: ... and {len(items) - _SHOWN} more {what}"] if len(items) > _SHOWN else [])


def _imports(elf: ELFFile) -> list[str]:
    dynsym = elf.get_section_by_name(".dynsym")
    if not isinstance(dynsym, SymbolTableSection):
        return []
    vsym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
    vneed = next((s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection)), None)
    bad = []
    for i, sym in enumerate(dynsym.iter_symbols()):
        if not sym.name or sym["st_shndx"] != "SHN_UNDEF":
            continue
        lib = None
        ndx = vsym.get_symbol(i)["ndx"] if vsym is not None else None
        if isinstance(ndx, int) and ndx > 1 and vneed is not None:
            found = vneed.get_version(ndx)
            lib = found[0].name if found else None
        weak = sym["st_info"]["bind"] == "STB_WEAK"
        if not import_allowed(sym.name, lib, weak):
            why = danger(sym.name)
            bad.append(f"host-code gate: imports {sym.name} (from {lib or 'no versioned library'}), "
                       f"not on the host allowlist" + (f": {why}" if why else ""))
    return _capped(bad, "imports off the allowlist")


def _dynamic(elf: ELFFile) -> list[str]:
    out = []
    for sec in elf.iter_sections():
        if not isinstance(sec, DynamicSection):
            continue
        for tag in sec.iter_tags():
            t = tag.entry.d_tag
            if t == "DT_NEEDED" and not tag.needed.startswith(NEEDED):
                out.append(f"host-code gate: needs library {tag.needed} (DT_NEEDED): only the CUDA runtime "
                           f"and driver, libc, libm and the C++ runtime are allowed")
            elif t in ("DT_RPATH", "DT_RUNPATH"):
                out.append(f"host-code gate: {t} set: a library of an allowed name could come from elsewhere")
            elif t == "DT_TEXTREL" or t == "DT_FLAGS" and tag.entry.d_val & 0x4:
                out.append("host-code gate: text relocations: the loader would write into the code")
    return out


def _syscall_sites(elf: ELFFile) -> list[tuple[int, str, str]]:
    """(address, instruction, section) of every system-call byte sequence in executable sections."""
    out = []
    for sec in elf.iter_sections():
        if not sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR or sec["sh_type"] == "SHT_NOBITS":
            continue
        data = sec.data()
        for pat, insn in SYSCALL_BYTES.items():
            at = data.find(pat)
            while at >= 0:
                out.append((sec["sh_addr"] + at, insn, sec.name))
                at = data.find(pat, at + 1)
    return out


def syscall_sites(path: str | Path) -> list[tuple[int, str, str]]:
    """The system-call byte sequences of the library at `path` (build.py relinks a library whose host
    code holds some only by chance, e.g. in a rip-relative displacement; [] if it is not ELF)."""
    try:
        with open(path, "rb") as f:
            return _syscall_sites(ELFFile(f))
    except (OSError, ELFError):
        return []


_DECODED = re.compile(r"^\s*([0-9a-f]+):\s+(syscall|sysenter|int\s+\$0x80)\b")


def decoded_syscalls(path: str | Path) -> list[tuple[int, str, str]] | None:
    """(address, instruction, section) of every system-call INSTRUCTION objdump's disassembly of the
    executable sections finds; None when objdump is missing or fails."""
    tool = shutil.which("objdump")
    if tool is None:
        return None
    try:
        r = subprocess.run([tool, "-d", "-w", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    out, sec = [], "?"
    for line in r.stdout.splitlines():
        if line.startswith("Disassembly of section "):
            sec = line[len("Disassembly of section "):].rstrip(":")
        elif (m := _DECODED.match(line)):
            out.append((int(m.group(1), 16), "int 0x80" if m.group(2).startswith("int") else m.group(2), sec))
    return out


def _syscalls(elf: ELFFile, path: Path) -> list[str]:
    """System-call instructions, found by disassembly. Their bytes inside other instructions (a
    displacement or an immediate: honest code holds some by chance) are not refused here: the worker
    kills any system call made from the candidate's pages (syscall_filter.py), and refuses a library
    holding such bytes where it cannot install that filter. Without objdump, every byte sequence refuses."""
    sites = _syscall_sites(elf)
    if not sites:
        return []
    decoded = decoded_syscalls(path)
    if decoded is None:
        out = [f"host-code gate: the bytes of a `{insn}` instruction at {at:#x} in {name} (objdump not found: "
               "bytes at any offset refuse): raw system calls bypass every import check" for at, insn, name in sites]
    else:
        out = [f"host-code gate: a `{insn}` instruction at {at:#x} in {name}: raw system calls bypass every "
               "import check" for at, insn, name in decoded]
    return _capped(out, "system-call instructions")


def _segments(elf: ELFFile) -> list[str]:
    out = []
    for seg in elf.iter_segments():
        fl = seg["p_flags"]
        if seg["p_type"] == "PT_LOAD" and fl & 1 and fl & 2:
            out.append(f"host-code gate: a segment at {seg['p_vaddr']:#x} is writable and executable: "
                       "code written at run time")
        elif seg["p_type"] == "PT_GNU_STACK" and fl & 1:
            out.append("host-code gate: executable stack requested: code written at run time")
    return out


def _func_names(elf: ELFFile) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    sec = elf.get_section_by_name(".symtab")
    if isinstance(sec, SymbolTableSection):
        for s in sec.iter_symbols():
            if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF":
                names.setdefault(s["st_value"], []).append(s.name)
    return names


def _array_targets(elf: ELFFile, sec) -> list[int]:
    """The function addresses in an init/fini array: its words, or the RELATIVE relocations'
    addends where the loader fills them in."""
    lo, n = sec["sh_addr"], sec["sh_size"] // 8
    words = list(struct.unpack(f"<{n}Q", sec.data())) if n else []
    for rs in elf.iter_sections():
        if isinstance(rs, RelocationSection) and rs.is_RELA():
            for r in rs.iter_relocations():
                k = (r["r_offset"] - lo) // 8
                if lo <= r["r_offset"] < lo + 8 * n:
                    words[k] = r["r_addend"] if r["r_info_sym"] == 0 else -1   # -1: a symbol's address
    return words


def _load_time_code(elf: ELFFile) -> list[str]:
    out = []
    for name in (".preinit_array", ".ctors", ".dtors"):
        sec = elf.get_section_by_name(name)
        if sec is not None and sec["sh_size"] > 0:
            out.append(f"host-code gate: {name} present: code that runs at load time")
    names = _func_names(elf)
    if not names:
        return out + ["host-code gate: no symbol table: nvcc's load-time code cannot be told from the candidate's"]
    for sec_name, allowed in ((".init_array", _INIT_OK), (".fini_array", _FINI_OK)):
        sec = elf.get_section_by_name(sec_name)
        if sec is None:
            continue
        seen: dict[str, int] = {}
        for addr in _array_targets(elf, sec):
            fn = (names.get(addr) or [f"the code at {addr:#x}" if addr >= 0 else "an imported function"])[0]
            seen[fn] = seen.get(fn, 0) + 1
        extra = [f"{fn}" + (f" (x{c})" if c > 1 else "") for fn, c in seen.items() if c > allowed.get(fn, 0)]
        if extra:
            out.append(f"host-code gate: {sec_name} runs {', '.join(extra)} at load/unload: only nvcc's "
                       f"{' and '.join(allowed)} may (no constructors, no global objects with initializers)")
    for tag, want in (("DT_INIT", "_init"), ("DT_FINI", "_fini")):
        addr = _dyn_value(elf, tag)
        if addr is not None and want not in names.get(addr, []):
            out.append(f"host-code gate: {tag} points at {(names.get(addr) or [hex(addr)])[0]}, not {want}")
    return out


def _dyn_value(elf: ELFFile, tag_name: str) -> int | None:
    for sec in elf.iter_sections():
        if isinstance(sec, DynamicSection):
            for tag in sec.iter_tags():
                if tag.entry.d_tag == tag_name:
                    return tag.entry.d_val
    return None
