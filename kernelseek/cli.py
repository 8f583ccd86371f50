"""The `kernelseek` command: one table of verbs; each verb's code is kernelseek/commands/<verb>.py.

Every verb is registered the same way: its module's `register(subparsers)` adds one parser named
after the verb, with `set_defaults(func=...)`; `func(args)` returns the exit code (EXIT_CODES).
Only the module of the verb being run is imported, so `kernelseek hook stop` answers without
importing torch.
"""
from __future__ import annotations

import argparse
import importlib
import os
import select
import sys

from .commands import EXIT_INPUT, UserError

# verb -> one-line help (the top-level `kernelseek --help` lists these without importing any verb)
VERBS = {
    "main": "the README's main job: evaluate on a GPU, else replay the committed H200 results",
    "eval": "build, check and time a kernel on a grid against a baseline",
    "grid": "list a grid's scenarios with FLOPs and bytes",
    "build": "build a kernel (a .cu file or a folder) and show its ptxas report and constraint check",
    "show": "print the results table and summary of a run directory",
    "peers": "every available attention implementation's time per row, per call and in graph replay",
    "triage": "which rows and feature groups bring the geometric mean down",
    "bounds": "time against the roofline bound; time outside the kernel",
    "ceilings": "measure this GPU's matrix rates, bandwidth and launch overhead",
    "profile": "Nsight Compute on one command (after --), its report parsed per kernel",
    "sass": "instruction mix of a built kernel, or the difference of two",
    "bank": "the question bank: lint, list, ask",
    "goal": "the goal verdict on a run directory (exit 0 only when met)",
    "review": "review a flagged row, so the goal can count it (or --list a run's flags)",
    "hook": "Claude Code hooks (stop)",
    "init": "add KernelSeek's Stop hook to a project's .claude/settings.json",
    "campaign": "agent campaigns: run, resume, matrix, restore, status",
    "ask": "put a question in a campaign's inbox for the agent's next turn",
    "trace": "import Claude Code sessions; print trace analytics",
    "report": "render a run's gap-triage and bounds notebooks to HTML",
}

EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe
EXIT_CODES = """exit codes (every verb; a code-2 problem is one line on stderr naming the file, field or scenario):
  0  success (eval: every scenario passed; goal: met; hook stop: always)
  1  a check failed (eval: some scenario's output was wrong; goal: not met; bank lint: errors;
     report: a notebook failed)
  2  usage or input error (unknown verb or option, a missing or unreadable file, a bad grid,
     results or goal file, an unknown baseline), or this machine lacks what the verb needs
     (eval: a CUDA GPU and nvcc; profile: ncu; ceilings: a CUDA GPU); nothing was built or run
  3  the build failed or the constraint check refused the kernel
  4  the kernel crashed, hung or raised an error on some scenario (and none failed a check)
  5  everything passed but some rows have no usable baseline (n/a)
  141  the output pipe was closed by its reader (e.g. `| head`); nothing else went wrong
"""


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (`kernelseek VERB: argument --x: ...`), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_INPUT, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def verb_module(verb: str):
    """The module that owns `verb` (kernelseek.commands.<verb>)."""
    return importlib.import_module(f"kernelseek.commands.{verb}")


def parser() -> argparse.ArgumentParser:
    return Parser(
        prog="kernelseek", usage="kernelseek [-h] VERB [ARGS ...]   (kernelseek VERB --help: its options)",
        description="Question-driven GPU kernel optimization.",
        epilog="verbs:\n" + "\n".join(f"  {v:9} {h}" for v, h in VERBS.items()) + "\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; returns its exit code (EXIT_CODES), also for --help and usage errors."""
    argv = sys.argv[1:] if argv is None else list(argv)
    top = parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0
    verb = argv[0]
    if verb not in VERBS:
        what = "option" if verb.startswith("-") else "verb"
        print(f"kernelseek: unknown {what} {verb!r}; the verbs are {', '.join(VERBS)} (see `kernelseek --help`)",
              file=sys.stderr)
        return EXIT_INPUT
    verb_module(verb).register(top.add_subparsers(dest="verb", metavar="VERB", prog="kernelseek"))
    try:
        args = top.parse_args(argv)
    except SystemExit as e:   # --help (0) or a usage error (2, its one line already printed)
        return e.code if isinstance(e.code, int) else EXIT_INPUT
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        sub = [v for k, v in vars(args).items() if k.endswith("_cmd") and isinstance(v, str)]
        print(f"kernelseek {' '.join([verb, *sub])}: {e}", file=sys.stderr)
        return e.code
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
