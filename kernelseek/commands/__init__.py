"""The `kernelseek` verbs, one module each (kernelseek/cli.py holds the table of verbs).

Each module defines `register(subparsers)`, which adds exactly one parser named after the module's
verb, with `set_defaults(func=...)`; `func(args)` parses nothing more, calls the library and returns
the exit code (cli.EXIT_CODES). A problem the user can fix is one line on stderr naming the file,
field or scenario at fault (`fail`), never a traceback. Library modules hold no CLI code.
"""
from __future__ import annotations

import sys


def fail(verb: str, message, code: int = 2) -> int:
    """Print `kernelseek VERB: message` on stderr (one line) and return the exit code."""
    text = " ".join(str(message).split()) or type(message).__name__
    print(f"kernelseek {verb}: {text}", file=sys.stderr)
    return code


def about(doc: str) -> str:
    """A verb module's docstring as its --help description: the first paragraph after its usage."""
    first = doc.strip().split("\n\n")[0]
    return first.split("`: ", 1)[-1]
