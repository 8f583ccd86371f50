"""`kernelseek build PATH [--define NAME=VALUE]...`: build a kernel (a .cu file or a kernel folder
<name>/, built from <name>/<name>.cu), optionally as a build variant; show its ptxas report and
constraint check.

Exit 0 built and allowed; 2 no such kernel, a bad define or --arch, or no nvcc on this machine; 3 the
build failed or the constraint check refused the kernel (the compiler's output is printed in full).
"""
from __future__ import annotations

from pathlib import Path

from . import about, user_input
from .. import build as B
from .. import constraints
from ..kernel_source import entry_file, format_defines, parse_defines


def register(subparsers) -> None:
    p = subparsers.add_parser("build", description=about(__doc__))
    p.add_argument("file", help="the kernel: a .cu file, or a folder <name>/ built from <name>/<name>.cu")
    p.add_argument("--arch", default="sm_90a", help="target, e.g. sm_90a (default) or sm_80")
    p.add_argument("--cache-dir", default=None, help="build cache (default $KSEEK_CACHE_DIR or ~/.cache/kernelseek/build)")
    p.add_argument("--flag", action="append", default=[], help="extra nvcc flag (repeatable)")
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                   help="build variant: -DNAME=VALUE, part of the cache key (repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    src = Path(args.file)
    with user_input(errors=(B.NvccNotFound, ValueError, FileNotFoundError)):  # no kernel; bad define or arch; no nvcc
        defines = parse_defines(args.define)
        entry_file(src)
        B.arch_flags(args.arch)
        B.find_nvcc()
    with user_input(args.cache_dir, errors=(OSError,)):
        r = B.build(src, arch=args.arch, extra_flags=args.flag, cache_dir=args.cache_dir, defines=defines)
    variant = f" with {format_defines(r.defines)}" if r.defines else ""
    if not r.ok:
        print(r.log)
        print(f"BUILD FAILED: {src}{variant} ({r.seconds:.1f} s)")
        return 3
    print(f"built {src}{variant} -> {r.so_path} ({'cached' if r.cached else f'{r.seconds:.1f} s'}, key {r.key[:12]})")
    print(B.format_ptxas(r.ptxas))
    verdicts = [("source", constraints.check_source(src)), ("binary", constraints.check_binary(r.so_path))]
    refused = False
    for what, v in verdicts:
        print(f"constraints ({what}): {'ok' if v.ok else 'REFUSED'}")
        for reason in v.reasons:
            print(f"  - {reason}")
        for note in v.notes:
            print(f"  note: {note}")
        refused |= not v.ok
    return 3 if refused else 0
