"""Gzip the results.json of committed run folders (store.pack_results), to keep the tracked tree small:
the whole tree travels to the GPU machine with every device call, within 64 MiB with the carried wheels.
Every reader goes through kernelseek.store, which reads results.json.gz where results.json is absent.

    python tools/pack_runs.py [RUNS_DIR]        (default data/runs; prints the bytes before and after)
"""
import sys
from pathlib import Path

from kernelseek import store


def main(root: str = "data/runs") -> int:
    before = after = n = 0
    for plain in sorted(Path(root).rglob(store.RESULTS)):   # nested runs too (data/runs/<ab>/<exp>/<run>/)
        run = plain.parent
        before += plain.stat().st_size
        after += store.pack_results(run).stat().st_size
        n += 1
    print(f"{root}: {n} results files packed, {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
