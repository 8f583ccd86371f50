"""One owner for the run and campaign folders, one place that finds the repository (issue 19).

Parsed with `ast` (a comment or a docstring that mentions results.json is fine; code that builds
the path is not):
- no module of kernelseek/ other than kernelseek/store.py spells a file name of a run or campaign
  folder (results.json, meta.json, trace.jsonl, ...) in a string, a path component included
  ("evals/3/results.json", "*/results.json");
- the folder names that are also common words (evals, versions, build, workspace, notebooks) are
  refused where a path is built: an operand of `/`, an argument of Path()/joinpath()/glob(), or a
  slash-separated piece of a string;
- no module but kernelseek/paths.py reads `__file__` (the repository root is found once).
"""
from __future__ import annotations

import ast
from pathlib import Path

from kernelseek import paths, store

PKG = paths.PACKAGE
OWNERS = {"store.py"}                       # may spell the folder names
ROOT_FINDER = "paths.py"                    # may read __file__

FILES = {store.RESULTS, store.RESULTS_GZ, store.RESULTS_PARQUET, store.META, store.CONFIG, store.GOAL, store.TRACE, store.INBOX,
         store.WORKER_LOG}
DIRS = {store.EVALS, store.VERSIONS, store.BUILD, store.WORKSPACE, store.NOTEBOOKS}
# build.py's content-addressed cache (~/.cache/kernelseek/build/<key>/meta.json) is the build's own
# folder, not a run or campaign folder: it keeps its own names. paths.py names the repository's
# notebooks/ folder (the notebooks themselves), not a run's executed ones.
ALLOWED = {("build.py", "meta.json"), ("build.py", "build"), ("paths.py", "notebooks")}
PATH_CALLS = {"Path", "PurePath", "joinpath", "glob", "rglob", "join", "with_name"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _path_operands(tree: ast.AST) -> set[int]:
    """ids of string constants used to build a path: `x / "s"`, Path("s"), p.joinpath("s"), ..."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            out |= {id(n) for n in (node.left, node.right) if isinstance(n, ast.Constant)}
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in PATH_CALLS:
                out |= {id(a) for a in node.args if isinstance(a, ast.Constant)}
    return out


def violations(source: str, filename: str) -> list[str]:
    """Each place `source` spells a folder name or reads __file__, as 'file:line: what'."""
    tree = ast.parse(source, filename=filename)
    name = Path(filename).name
    docs, in_path = _docstrings(tree), _path_operands(tree)
    out = []
    for node in sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")), key=lambda n: n.lineno):
        if isinstance(node, ast.Name) and node.id == "__file__" and name != ROOT_FINDER:
            out.append(f"{filename}:{node.lineno}: reads __file__ (use kernelseek.paths)")
        if name in OWNERS or not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        s = node.value
        if id(node) in docs or any(c.isspace() for c in s):
            continue                                   # prose: a docstring, a message, help text
        parts = set(s.split("/"))
        hits = parts & FILES
        if id(node) in in_path or "/" in s:
            hits |= parts & DIRS
        hits = {h for h in hits if (name, h) not in ALLOWED}
        if hits:
            out.append(f"{filename}:{node.lineno}: spells {', '.join(sorted(hits))} (use kernelseek.store)")
    return out


def test_no_module_but_the_store_spells_folder_names_and_only_paths_finds_the_root():
    assert {"results.json", "meta.json", "trace.jsonl", "inbox.jsonl", "config.json", "results.parquet"} <= FILES
    assert {"evals", "versions", "build"} <= DIRS
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 30, "the check should cover the whole package"
    found = [v for f in files for v in violations(f.read_text(encoding="utf-8"), str(f.relative_to(PKG.parent)))]
    assert not found, "\n".join(found)


def test_the_check_finds_what_it_should_and_spares_prose():
    bad = '''
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
def f(run, n):
    a = run / "results.json"
    b = Path(run, "evals")
    c = run.joinpath("versions")
    d = run.glob("*/meta.json")
    e = f"{run}/evals/{n}"
    return "trace.jsonl"
'''
    got = violations(bad, "kernelseek/x.py")
    assert [v.split(":")[1] for v in got] == ["3", "5", "6", "7", "8", "9", "10"], got
    ok = '''
"""Writes results.json and evals/<n>/ (a docstring may say so)."""
def f(state):
    print("wrote results.json for each of the evals")     # prose, with spaces
    parser.add_parser("build")                            # a verb, not a path
    return state["evals"], ("build", "benchmark")
'''
    assert violations(ok, "kernelseek/y.py") == []
    assert violations('x = Path(__file__).parent / "grids"\n', "kernelseek/paths.py") == []
    assert violations('p = root / "meta.json"\n', "kernelseek/build.py") == []       # the build cache's own
    assert violations('p = root / "meta.json"\n', "kernelseek/store.py") == []


def test_paths_point_into_this_checkout():
    assert (paths.PACKAGE / "store.py").is_file() and paths.REPO == paths.PACKAGE.parent
    assert paths.KSEEK_H.is_file() and (paths.GRIDS / "bench26.yaml").is_file()
    assert paths.DEFAULT_GOAL.is_file() and paths.BANK.is_dir() and paths.DATA_RUNS.is_dir()
