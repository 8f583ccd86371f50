"""Files short enough to read in one sitting (issue 19): no module in kernelseek/ over MAX_MODULE_LINES
lines and no function over MAX_FUNCTION_LINES. Nothing is allowlisted: a module that grows past the
limit is split by noun, a function that does is split into named steps."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "kernelseek"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80      # def line to last line, docstring and comments included


def module_sizes(root: Path = PKG) -> dict[str, int]:
    return {str(p.relative_to(root.parent)): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(root.rglob("*.py"))}


def function_sizes(root: Path = PKG) -> dict[str, int]:
    """'kernelseek/x.py:Class.method' -> its length in lines (nested functions count in their parent
    and on their own)."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                        out[f"{p.relative_to(root.parent)}:{name}"] = child.end_lineno - start + 1
                    walk(child, name + ".")
                else:
                    walk(child, prefix)
        walk(tree, "")
    return out


def test_no_module_over_the_limit():
    big = {m: n for m, n in module_sizes().items() if n > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split them by noun): {big}"


def test_no_function_over_the_limit():
    long = {f: n for f, n in function_sizes().items() if n > MAX_FUNCTION_LINES}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {long}"


def test_the_counters_count(tmp_path):
    pkg = tmp_path / "kernelseek"
    pkg.mkdir()
    (pkg / "a.py").write_text("class C:\n    @staticmethod\n    def m():\n        def inner():\n            return 1\n"
                              "        return inner()\n\n\ndef f():\n    pass\n")
    assert module_sizes(pkg) == {"kernelseek/a.py": 10}
    assert function_sizes(pkg) == {"kernelseek/a.py:C.m": 5, "kernelseek/a.py:C.m.inner": 2, "kernelseek/a.py:f": 2}
