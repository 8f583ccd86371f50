"""`kernelseek eval KERNEL --grid G [--define NAME=VALUE]...`: build, check and time a kernel (a .cu file
or a kernel folder) on a grid against a baseline, optionally as a build variant.

Every input is checked first (kernel, grid, scenarios, baseline, timeout, budget, arch, defines),
then the machine (nvcc, a CUDA GPU): a problem with either is one line and exit 2, before anything
is built or a run directory is made.
"""
from __future__ import annotations

from . import UserError, about, user_input
from .. import evaluate as E
from .. import results as R
from ..kernel_source import format_defines, parse_defines
from ..store import Run


def register(subparsers) -> None:
    p = subparsers.add_parser("eval", description=about(__doc__))
    p.add_argument("kernel", help="the kernel implementing kernels/kseek.h: a .cu file, or a folder <name>/ "
                   "built from <name>/<name>.cu")
    p.add_argument("--grid", default="smoke", help="grid name (kernelseek/grids) or YAML path")
    p.add_argument("--baseline", default="best", help="best | all | cudnn | fa2 | flash_op | flex | fa4 | fa3 | flashinfer | FILE.cu")
    p.add_argument("--scenarios", help="filter: names, substrings, rows (3,20-24)")
    p.add_argument("--check-only", action="store_true", help="check correctness only, no timing")
    p.add_argument("--json", action="store_true", help="print results.json instead of the table")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: a fresh random one, recorded)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per scenario before the worker is killed")
    p.add_argument("--budget", type=float, default=0.4, help="seconds of timed calls per implementation and scenario")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--arch", default="sm_90a")
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                   help="build variant: compile with -DNAME=VALUE, recorded as meta build_defines (repeatable)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-defence", action="store_true",
                   help="time the old way (fixed input sets, no verification, no run-time code check): "
                        "only to measure what the defence costs; such rows never meet a goal")
    p.add_argument("--graph", action="store_true", help="also time CUDA-graph replay (graph_ms): the candidate's and every "
                   "baseline's that can be captured (graph_speedup)")
    p.add_argument("--graph-rounds", type=int, default=0, metavar="N",
                   help="with --graph: N more rounds of graph replays alternating between the candidate and each "
                        "baseline; their medians are the graph times (drift between implementations cancels)")
    p.add_argument("--confine", action="store_true",
                   help="build and run the kernel under bubblewrap, as campaign evaluations are (kernelseek.confine)")
    p.set_defaults(func=run)


def run(args) -> int:
    with user_input():
        defines = parse_defines(args.define)
        E.check_inputs(args.kernel, args.grid, args.baseline, args.scenarios, args.timeout, args.budget, args.arch,
                       defines, args.graph_rounds)
    problem = E.machine_problem()
    if not problem and args.confine:
        from ..confine import unavailable
        problem = unavailable()            # --confine without bubblewrap: no silent fallback
    if problem:
        raise UserError(problem)
    run_dir, rows, meta = E.evaluate(args.kernel, args.grid, args.baseline, args.scenarios, args.check_only,
                                     args.seed, args.timeout, args.budget, args.runs_dir, args.arch,
                                     progress=not args.no_progress, defines=defines,
                                     defence=not args.no_defence, graph=args.graph, confine=args.confine,
                                     graph_rounds=args.graph_rounds)
    if args.json:
        print(Run(run_dir).results_file.read_text())
    else:
        print(R.format_table(rows))
        if meta.get("build_defines"):
            print(f"build variant: {format_defines(meta['build_defines'])}")
        ov = meta.get("harness_overhead_s")
        print(f"run directory: {run_dir}   wall {meta.get('wall_s', 0):.1f} s"
              + (f", harness overhead {ov:.1f} s" if ov is not None else ""))
    return E.exit_code(rows)
