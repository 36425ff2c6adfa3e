"""The package's import graph, built from its source, has no cycle; no function shadows its module.

Every ``import`` / ``from ... import`` statement counts, at any depth (inside functions
too), except those under ``if TYPE_CHECKING:``: an import inside a function only hides a
cycle until the function runs. ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module of the package, else to ``pkg``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import metricdp

SRC = Path(metricdp.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in modules:
                        edges.add(sub)
                    elif target in modules:
                        edges.add(target)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path (first node repeated at the end), or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if node not in colour and (found := visit(node)):
            return found
    return None


def test_finder_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    assert "metricdp.errors" in graph["metricdp._validation"]


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_function_shadows_its_module() -> None:
    shadowed = []
    for info in pkgutil.walk_packages(metricdp.__path__, "metricdp."):
        module = importlib.import_module(info.name)
        parent_name, _, attr = info.name.rpartition(".")
        parent = importlib.import_module(parent_name)
        if getattr(parent, attr, module) is not module:
            shadowed.append(info.name)
    assert not shadowed, f"names bound to something other than their module: {shadowed}"
