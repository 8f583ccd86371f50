"""No import circles inside kernelseek/ (issue 19): the module graph, built from the source with `ast`.

Every import counts, the ones inside functions too (a function-level import is how a circle hides:
it works until someone calls the function first). An edge a -> b means module a names module b in
an `import` or `from ... import`; `from pkg import name` is an edge to pkg.name when that is a module,
else to pkg. Parent packages imported implicitly are not edges (every submodule would otherwise sit in
a circle with an `__init__` that re-exports it).
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "kernelseek"


def module_name(path: Path, root: Path = PKG) -> str:
    """kernelseek/agent/loop.py -> kernelseek.agent.loop; kernelseek/agent/__init__.py -> kernelseek.agent."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = PKG) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _resolve(current: str, is_pkg: bool, level: int, name: str | None) -> str:
    """The absolute module a relative `from` names (level dots, then name)."""
    if level == 0:
        return name or ""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(mod: str, path: Path, known: set[str]) -> set[str]:
    """The kernelseek modules `mod` imports anywhere in its file (module level and inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                # `import kernelseek.a.b` binds kernelseek but runs kernelseek.a.b: the edge is to it
                if a.name in known:
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, is_pkg, node.level, node.module)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in known:
                    out.add(sub)
                elif target in known:
                    out.add(target)
    out.discard(mod)
    return out


def graph(root: Path = PKG) -> dict[str, set[str]]:
    mods = modules(root)
    known = set(mods)
    return {m: imports_of(m, p, known) for m, p in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None. Depth-first search with colours."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {m: WHITE for m in g}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        colour[m] = GREY
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if colour.get(n) == GREY:
                return stack[stack.index(n):] + [n]
            if colour.get(n) == WHITE and (c := visit(n)):
                return c
        stack.pop()
        colour[m] = BLACK
        return None

    for m in sorted(g):
        if colour[m] == WHITE and (c := visit(m)):
            return c
    return None


def all_cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (each holds at least one circle)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def test_no_import_circles_in_kernelseek():
    g = graph()
    assert len(g) > 30, "the graph should cover the whole package"
    cycle = find_cycle(g)
    assert cycle is None, ("import circle: " + " -> ".join(cycle) +
                           f"\nall circular groups: {all_cycles(g)}")


def test_the_detector_finds_a_function_level_circle(tmp_path):
    """The detector itself: a circle made only by an import inside a function is found and named."""
    pkg = tmp_path / "kernelseek"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .b import thing\n")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def thing():\n    from .. import a\n    return a\n")
    (pkg / "c.py").write_text("import kernelseek.a\n")
    g = graph(pkg)
    assert g["kernelseek.a"] == {"kernelseek.sub.b"}
    assert g["kernelseek.sub.b"] == {"kernelseek.a"}
    assert g["kernelseek.c"] == {"kernelseek.a"}
    assert find_cycle(g) == ["kernelseek.a", "kernelseek.sub.b", "kernelseek.a"]
    (pkg / "sub" / "b.py").write_text("def thing():\n    return 1\n")
    assert find_cycle(graph(pkg)) is None
