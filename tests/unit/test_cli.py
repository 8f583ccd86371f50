"""The `kernelseek` command's shape (issue 19): one table of verbs, one module per verb, registered one way,
and no CLI code in the library modules."""
from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import pytest

from kernelseek.cli import VERBS

PKG = Path(__file__).resolve().parents[2] / "kernelseek"


def test_every_verb_has_its_own_module_and_nothing_else_is_there():
    modules = {p.stem for p in (PKG / "commands").glob("*.py") if p.stem != "__init__"}
    assert modules == set(VERBS)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_each_module_registers_exactly_its_verb(verb):
    mod = importlib.import_module(f"kernelseek.commands.{verb}")
    top = argparse.ArgumentParser()
    sub = top.add_subparsers(dest="verb")
    mod.register(sub)
    assert list(sub.choices) == [verb]
    p = sub.choices[verb]
    assert p.description, f"{verb}: its --help should say what it does"
    assert callable(p.get_default("func")), f"{verb}: no handler set with set_defaults(func=...)"


def test_library_modules_hold_no_cli_code():
    """argparse and `register(subparsers)` live in cli.py and commands/ only (the import circles came from
    CLI code inside library modules)."""
    offenders = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        if rel.parts[0] == "commands" or rel.name in ("cli.py", "__main__.py"):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "argparse" in names:
                    offenders.append(f"{rel}:{node.lineno}: imports argparse")
            elif isinstance(node, ast.FunctionDef) and node.name == "register" and node.col_offset == 0:
                offenders.append(f"{rel}:{node.lineno}: defines register()")
            elif isinstance(node, ast.Attribute) and node.attr == "add_parser":
                offenders.append(f"{rel}:{node.lineno}: calls add_parser")
    assert not offenders, "\n".join(offenders)
