"""The `kernelseek` verbs, one module each (kernelseek/cli.py holds the table of verbs).

Each module defines `register(subparsers)`, which adds exactly one parser named after the module's
verb, with `set_defaults(func=...)`; `func(args)` parses nothing more, calls the library and returns
the exit code (cli.EXIT_CODES). A problem the user can fix is raised as a UserError (or converted
to one by `user_input`): cli.main prints it as one line, `kernelseek VERB: message`, on stderr and
exits with its code; never a traceback. Library modules hold no CLI code.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

EXIT_INPUT = 2     # usage or input error, or this machine lacks what the verb needs (cli.EXIT_CODES)


class UserError(Exception):
    """A problem the user can fix: a file, field, scenario or missing tool, named in the message."""

    def __init__(self, message: str, code: int = EXIT_INPUT):
        super().__init__(" ".join(str(message).split()))
        self.code = code


def describe_error(e: BaseException, what=None) -> str:
    """One line for an error met reading `what` (a path or a field): the culprit named once."""
    if isinstance(e, UnicodeDecodeError):
        msg = f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})"
    elif isinstance(e, KeyError) and e.args:       # str(KeyError) quotes its message
        msg = str(e.args[0])
    elif isinstance(e, OSError) and e.strerror:
        where = e.filename if e.filename is not None else what
        msg = f"{where}: {e.strerror.lower()}" if where is not None else e.strerror.lower()
    else:
        msg = " ".join(str(e).split()) or type(e).__name__
    if what is not None and str(what) not in msg:
        msg = f"{what}: {msg}"
    return msg


@contextlib.contextmanager
def user_input(what=None, errors=(OSError, ValueError)):
    """Inside this block, an error reading or parsing the user's input `what` (a file, a field)
    becomes a one-line UserError naming it. Keep the block to the reading and parsing: an error
    there is the input's; anywhere else it is a bug, and a traceback says more."""
    try:
        yield
    except UserError:
        raise
    except errors as e:
        raise UserError(describe_error(e, what)) from None


def existing(path, kind: str = "file or directory") -> Path:
    """`path` as a Path, or a UserError when nothing is there."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such {kind}")
    return p


def about(doc: str) -> str:
    """A verb module's docstring as its --help description: the first paragraph after its usage."""
    first = doc.strip().split("\n\n")[0]
    return first.split("`: ", 1)[-1]


def needs_subcommand(parser, subparsers) -> None:
    """A verb given without its subcommand (`kernelseek campaign`): one line listing them, exit 2."""
    def missing(args):
        raise UserError(f"give a subcommand: {', '.join(subparsers.choices)} "
                        f"(see `{parser.prog} --help`)")
    parser.set_defaults(func=missing)
