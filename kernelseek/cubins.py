"""The device code embedded in a built kernel: its cubins and each kernel's code, hashed.

The run-time check (runcheck.py) compares what ran with this, by code, never by name: a kernel
counts as the candidate's own only when its code (or its whole cubin) is byte-identical to one in
the candidate's .so. Per kernel the hash is the SHA-256 of its `.text.<name>` section with every
16-byte instruction that a relocation patches zeroed (the loader fills addresses there), the same
rule as kernelseek/native/kseek_trust.c applies to the cubins the driver loads; a kernel is an
STT_FUNC symbol marked as an entry (st_other & 0x10), and its subroutines share its section.

Extraction: the .so's `.nv_fatbin` section holds fatbin containers (magic 0xBA55ED50), each with
entries (kind 2 = ELF); uncompressed ELF payloads are read directly. A compressed payload (nvcc's
fatbin compression) is extracted with `cuobjdump -xelf all` instead.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

FATBIN_MAGIC = 0xBA55ED50
STO_ENTRY = 0x10
INSN = 16                         # bytes per sm_70+ instruction


@dataclass
class CubinCode:
    sha256: str                   # of the whole cubin
    size: int
    kernels: dict[str, str] = field(default_factory=dict)   # kernel name -> masked code sha256
    names_sha256: str = ""        # of the sorted kernel names, each NUL-terminated


def _symbols(elf: ELFFile, secs: list):
    """(name, st_info type, st_other, st_shndx) of every .symtab entry, from the raw table: pyelftools
    folds st_other into visibility bits and drops the entry mark (0x10)."""
    for sec in secs:
        if not isinstance(sec, SymbolTableSection) or sec["sh_type"] != "SHT_SYMTAB":
            continue
        raw = sec.data()
        strtab = secs[sec["sh_link"]]
        for i in range(len(raw) // 24):
            st_name, st_info, st_other, st_shndx, _v, _s = struct.unpack_from("<IBBHQQ", raw, 24 * i)
            yield strtab.get_string(st_name), st_info & 0xF, st_other, st_shndx


STT_FUNC = 2


def kernel_table(img: bytes) -> CubinCode:
    """The kernels of one cubin and their masked code hashes (see the module docstring)."""
    elf = ELFFile(io.BytesIO(img))
    secs = list(elf.iter_sections())
    funcs = [(n, other, idx) for n, typ, other, idx in _symbols(elf, secs)
             if typ == STT_FUNC and 0 < idx < len(secs) and secs[idx].name.startswith(".text.")]
    entries = [f for f in funcs if f[1] & STO_ENTRY]
    out = CubinCode(hashlib.sha256(img).hexdigest(), len(img))
    for name, _other, idx in entries or funcs:
        code = bytearray(secs[idx].data())
        for rel in secs:
            if isinstance(rel, RelocationSection) and rel["sh_info"] == idx:
                for r in rel.iter_relocations():
                    off = r["r_offset"] & ~(INSN - 1)
                    code[off:off + INSN] = bytes(len(code[off:off + INSN]))
        out.kernels[name] = hashlib.sha256(bytes(code)).hexdigest()
    out.names_sha256 = hashlib.sha256(b"".join(n.encode() + b"\0" for n in sorted(out.kernels))).hexdigest()
    return out


def fatbin_elves(so_path: str | Path) -> tuple[list[bytes], int]:
    """The uncompressed ELF payloads of a shared library's fatbins, and how many were compressed."""
    with open(so_path, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".nv_fatbin")
        data = sec.data() if sec is not None else b""
    out, compressed, off = [], 0, 0
    while off + 16 <= len(data):
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", data, off)
        if magic != FATBIN_MAGIC:
            break
        p, end = off + hsize, off + hsize + fsize
        while p + 16 <= end:
            kind, _v, ehs, psize = struct.unpack_from("<HHIQ", data, p)
            payload = data[p + ehs:p + ehs + psize]
            if kind == 2:
                if payload[:4] == b"\x7fELF":
                    out.append(bytes(payload))
                else:
                    compressed += 1
            p += ehs + psize
        off = (end + 7) & ~7
    return out, compressed


def extract_cubins(so_path: str | Path) -> list[bytes]:
    """Every cubin (ELF) a shared library embeds; cuobjdump where a payload is compressed."""
    elves, compressed = fatbin_elves(so_path)
    if not compressed:
        return elves
    from .profile import find_tool
    tool = find_tool("cuobjdump")
    if not tool:
        raise FileNotFoundError(f"{so_path}: its fatbin is compressed and cuobjdump was not found")
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([tool, "-xelf", "all", str(Path(so_path).resolve())], cwd=d, capture_output=True,
                       check=True, timeout=300)
        return [p.read_bytes() for p in sorted(Path(d).glob("*.cubin"))]


@dataclass
class OwnCode:
    """What counts as the candidate's own device code."""
    cubins: dict[str, CubinCode]              # cubin sha256 -> its kernels
    kernel_code: set[str]                     # every kernel code hash

    def owns_cubin(self, sha: str) -> bool:
        return sha in self.cubins

    def owns_code(self, sha: str) -> bool:
        return sha in self.kernel_code

    def to_json(self) -> str:
        return json.dumps({"cubins": {k: {"size": c.size, "kernels": c.kernels, "names_sha256": c.names_sha256}
                                      for k, c in self.cubins.items()}})

    @classmethod
    def from_json(cls, text: str) -> "OwnCode":
        d = json.loads(text)
        cubins = {k: CubinCode(k, v["size"], v["kernels"], v["names_sha256"]) for k, v in d["cubins"].items()}
        return cls(cubins, {h for c in cubins.values() for h in c.kernels.values()})


def own_code(so_path: str | Path) -> OwnCode:
    """The candidate's own device code, cached beside the library as <so>.owncode.json."""
    so = Path(so_path)
    cache = so.with_name(so.name + ".owncode.json")
    if cache.is_file() and cache.stat().st_mtime >= so.stat().st_mtime:
        try:
            return OwnCode.from_json(cache.read_text())
        except (ValueError, KeyError):        # damaged: recompute
            pass
    tables = [kernel_table(img) for img in extract_cubins(so)]
    own = OwnCode({t.sha256: t for t in tables}, {h for t in tables for h in t.kernels.values()})
    try:                                      # atomically: workers may read it while another writes
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(own.to_json())
        os.replace(tmp, cache)
    except OSError:
        pass                                  # a read-only cache: recompute next time
    return own
