"""calibview's import graph read from the source: every import statement counted, at module level, inside
functions, under ``if TYPE_CHECKING:`` and through ``importlib.import_module("...")`` with a literal name.

``from pkg import x`` counts as importing the submodule ``pkg.x`` when there is one and the package ``pkg``
otherwise (as grimp, import-linter's graph, does). Used by tests/test_architecture.py."""

from __future__ import annotations

import ast
from pathlib import Path


def modules(root: Path, package: str = "calibview") -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``root / package`` (packages by ``__init__``)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    if not _is_package(path):
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The internal modules that module ``name`` (its source at ``path``) imports, by every route."""
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:          # ``import a.b.C`` of a class: its module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base)
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            add(node.args[0].value)
    return found


def graph(root: Path, package: str = "calibview") -> dict[str, set[str]]:
    """Module -> the internal modules it imports."""
    mods = modules(root, package)
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted; [] when acyclic."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        # iterative, so a deep graph cannot hit the recursion limit
        work = [(v, iter(sorted(g.get(v, ()))))]
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on_stack.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop(); on_stack.discard(w); comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def cycle_path(g: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete circle through a component, ``[a, b, ..., a]``, for a readable failure message."""
    members, start = set(component), component[0]
    prev: dict[str, str] = {}
    seen, frontier = {start}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return component
