"""The command line of kernelseek/sass_identity.py: is every kernel of two builds the same machine code?

    python tools/sass_identity.py OLD NEW            # a table, one row per kernel; exit 0 when all match
    python tools/sass_identity.py OLD NEW --diff fwd_kernel<__nv_bfloat16, 128   # + the listing diff
    python tools/sass_identity.py BUILD.so --write REF.json [--drop REGEX ...]    # a reference file

A developer's check (issue 19's proof that a refactor left the SASS alone), not a `kernelseek` verb;
run it from the repository root (this script puts the checkout on sys.path).
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelseek import sass_identity as SI  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/sass_identity.py", description=SI.__doc__.split("\n")[0])
    ap.add_argument("old", help="a built .so/.cubin, or a reference .json")
    ap.add_argument("new", nargs="?", help="the build to compare with OLD")
    ap.add_argument("--diff", action="append", default=[], help="print the normalised listing diff of the "
                    "kernels whose key contains this text (both sides must be builds)")
    ap.add_argument("--with-dropped", action="store_true", help="OLD is a reference .json: compare NEW's "
                    "kernels with its dropped kernels too, and list only those NEW has (a variant build)")
    ap.add_argument("--added", action="append", default=[], help="kernels only NEW has that are expected "
                    "(regex on the key): they do not make the exit status 1")
    ap.add_argument("--write", help="write OLD's records to this .json (no comparison)")
    ap.add_argument("--drop", action="append", default=[], help="with --write: leave out keys matching this regex")
    ap.add_argument("--note", default="", help="with --write: a note stored in the file")
    ap.add_argument("--flags", default="", help="with --write: the nvcc flags of the build, stored")
    ap.add_argument("--nvcc", default="", help="with --write: the nvcc version line, stored")
    a = ap.parse_args(argv)
    if a.write:
        doc = SI.write_reference(a.old, a.write, a.drop, a.note, a.flags, a.nvcc)
        print(f"wrote {a.write}: {len(doc['kernels'])} kernels ({len(doc['dropped'])} dropped)")
        return 0
    if not a.new:
        ap.error("NEW is required unless --write is given")
    old, new = SI.records(a.old, a.with_dropped), SI.records(a.new)
    if a.with_dropped:
        old = {k: v for k, v in old.items() if k in new}
    rows = SI.compare(old, new)
    print(SI.table(rows))
    for pat in a.diff:
        for k in sorted(k for k in set(old) & set(new) if pat in k):
            if "lines" not in old[k] or "lines" not in new[k]:
                print(f"--diff {pat}: {k}: a reference .json has no listing; compare two builds")
                continue
            print(f"=== {k}")
            print("\n".join(difflib.unified_diff(old[k]["lines"], new[k]["lines"], "old", "new", n=2, lineterm="")))
    expected = lambda r: r["status"] == "only new" and any(re.search(x, r["key"]) for x in a.added)
    return 0 if all(r["status"] == "same" or expected(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
