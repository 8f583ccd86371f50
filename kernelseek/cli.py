"""The `kernelseek` command: thin; each verb lives in the module that owns it.

Each module named in VERBS defines `register(subparsers)`, adding its parser(s) with
`set_defaults(func=...)`; `func(args)` returns the exit code. Only the module of the verb being
run is imported, so `kernelseek hook stop` answers without importing torch.
"""
from __future__ import annotations

import argparse
import importlib
import os
import select
import sys

# verb -> (module, one-line help)
VERBS = {
    "main": ("kernelseek.mainjob", "the README's main job: evaluate on a GPU, else replay the committed H200 results"),
    "eval": ("kernelseek.evaluate", "build, check and time a kernel on a grid against a baseline"),
    "grid": ("kernelseek.scenarios_cli", "list a grid's scenarios with FLOPs and bytes"),
    "build": ("kernelseek.build", "build a kernel file and show its ptxas report and constraint check"),
    "show": ("kernelseek.mainjob", "print the results table and summary of a run directory"),
    "triage": ("kernelseek.triage", "which rows and feature groups bring the geometric mean down"),
    "bounds": ("kernelseek.bounds", "time against the roofline bound; time outside the kernel"),
    "ceilings": ("kernelseek.bounds", "measure this GPU's matrix rates, bandwidth and launch overhead"),
    "profile": ("kernelseek.profile", "Nsight Compute on one scenario; SASS instruction mix"),
    "sass": ("kernelseek.profile", "instruction mix of a built kernel, or the difference of two"),
    "bank": ("kernelseek.bank", "the question bank: lint, list"),
    "goal": ("kernelseek.goal", "the goal verdict on a run directory (exit 0 only when met)"),
    "review": ("kernelseek.review", "review a flagged row, so the goal can count it (or --list)"),
    "hook": ("kernelseek.hooks", "Claude Code hooks (stop)"),
    "init": ("kernelseek.hooks", "add KernelSeek's Stop hook to a project's .claude/settings.json"),
    "campaign": ("kernelseek.campaign", "run, resume, matrix, restore or show agent campaigns"),
    "ask": ("kernelseek.inbox", "put a question in a campaign's inbox for the agent's next turn"),
    "trace": ("kernelseek.traces", "import Claude Code sessions; print trace analytics"),
    "report": ("kernelseek.report", "render a run's gap-triage and bounds notebooks to HTML"),
}

EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe
EXIT_CODES = """exit codes:
  0  success (eval: every scenario passed; goal: met)
  1  a check failed (eval: some scenario's output was wrong; goal: not met)
  2  usage or input error (bad grid, missing file)
  3  the build failed or the constraint check refused the kernel
  4  the kernel crashed, hung or raised an error on some scenario (and none failed a check)
  5  everything passed but some rows have no usable baseline (n/a)
  141  the output pipe was closed by its reader (e.g. `| head`); nothing else went wrong
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = argv[0] if argv and not argv[0].startswith("-") else None
    parser = argparse.ArgumentParser(
        prog="kernelseek", description="Question-driven GPU kernel optimization.",
        epilog="verbs:\n" + "\n".join(f"  {v:9} {h}" for v, (_, h) in VERBS.items()) + "\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    if verb is None or verb not in VERBS:
        parser.print_help()
        return 0 if verb is None and not argv else 2
    importlib.import_module(VERBS[verb][0]).register(sub)
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # another pipe (a worker's, say) broke: that is an error, not a closed `| head`
        # The reader went away (`kernelseek goal ... | head`): stop quietly, as Unix tools do.
        # stdout now points at /dev/null so the interpreter's final flush cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


def _stdout_reader_gone() -> bool:
    """True when stdout is a pipe whose reading end is closed (poll reports an error on it)."""
    try:
        p = select.poll()
        p.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):  # no real fd (captured), no poll on this OS
        return False


if __name__ == "__main__":
    sys.exit(main())
