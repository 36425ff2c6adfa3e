"""The package's import graph, built from its source, has no cycle; no function shadows its module.

Every ``import`` / ``from ... import`` statement counts, at any depth (inside functions
too), except those under ``if TYPE_CHECKING:``: an import inside a function only hides a
cycle until the function runs. ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module of the package, else to ``pkg``.
"""

from __future__ import annotations

import ast
import functools
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
    """Module -> the package modules it imports (a fresh copy: callers may change it)."""
    return {name: set(edges) for name, edges in _import_graph().items()}


@functools.cache
def _import_graph() -> dict[str, frozenset[str]]:
    """The graph, parsed once per process: every test of the layers reads the same source tree."""
    modules = _modules()
    graph: dict[str, frozenset[str]] = {}
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
        graph[name] = frozenset(edges)
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


# ----------------------------------------------------------------------------- layers
#: The floors of the package, lowest first: a module may import modules on its own floor or
#: below, never above. Grouped by top-level name (a subpackage is one group; inside it only
#: the no-cycle test applies). Names listed before they exist (``tabular``, the file layer;
#: ``accounting``, the ledger) are checked from the day they land; a new top-level module
#: must be placed here (``test_every_top_level_module_has_a_floor``). ``lp``, the LP solver
#: layer, sits just below ``mechanisms``: the LP mechanisms use it, and it knows no mechanism
#: (``test_the_lp_layer_imports_only_what_it_may`` narrows it further).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "_jsonable", "_lazy", "_optional", "_progress", "_random", "_resources", "_validation", "_version",
     "_ibu_kernels"),
    ("spaces", "audit", "audit_structured", "loss", "sampling"),
    ("outputs", "pointspace", "io", "bounds", "tabular", "data", "elastic", "units", "covariance", "settings"),
    ("lp",),
    ("mechanisms",),
    ("text", "location", "pipeline", "streaming", "integrations", "estimation", "intervals", "remap", "evaluation",
     "adversary", "report", "explore", "explore_page", "kmedian", "accounting", "ldp", "frames", "graphs", "targets"),
    ("experiments",),
    ("cli", "__main__"),  # `python -m metricdp` is the command line
)
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _floor(group: str) -> int:
    if group in FLOOR:
        return FLOOR[group]
    return 0 if group.startswith("_") else -1  # a private helper not listed sits at the bottom


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's, as 'a (floor) -> b (floor)'."""
    out = []
    for module, targets in sorted(graph.items()):
        group = _group(module)
        if not group:  # metricdp/__init__ re-exports from every floor: the package's front door
            continue
        for target in sorted(targets):
            other = _group(target)
            if other and other != group and _floor(other) > _floor(group):
                out.append(f"{module} (floor {_floor(group)}) -> {target} (floor {_floor(other)})")
    return out


def test_layer_check_sees_an_upward_import() -> None:
    graph = {"metricdp.spaces": {"metricdp.mechanisms.base"}, "metricdp.mechanisms.base": {"metricdp.spaces"},
             "metricdp.lp.core": {"metricdp.mechanisms.optimal"}, "metricdp.mechanisms.optimal": {"metricdp.lp.core"}}
    assert layer_violations(graph) == [
        "metricdp.lp.core (floor 3) -> metricdp.mechanisms.optimal (floor 4)",
        "metricdp.spaces (floor 1) -> metricdp.mechanisms.base (floor 4)",
    ]


#: What the LP solver layer may import besides itself: the private helpers and the floor of
#: spaces, audit, loss and sampling. Never a mechanism (the mechanisms import the solver).
LP_MAY_IMPORT = frozenset({"spaces", "audit", "loss", "sampling", "errors"})


def lp_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of ``metricdp.lp`` outside :data:`LP_MAY_IMPORT` and the private helpers."""
    return [f"{module} -> {target}" for module, targets in sorted(graph.items()) if _group(module) == "lp"
            for target in sorted(targets)
            if (other := _group(target)) not in ("lp", "") and other not in LP_MAY_IMPORT and not other.startswith("_")]


def test_lp_check_sees_a_mechanism_import() -> None:
    graph = {"metricdp.lp.core": {"metricdp.spaces", "metricdp._progress", "metricdp.mechanisms.base",
                                  "metricdp.outputs", "metricdp.lp._solve"}}
    assert lp_violations(graph) == ["metricdp.lp.core -> metricdp.mechanisms.base",
                                    "metricdp.lp.core -> metricdp.outputs"]


def test_the_lp_layer_imports_only_what_it_may() -> None:
    graph = import_graph()
    assert any(_group(m) == "lp" for m in graph), "metricdp.lp is missing"
    violations = lp_violations(graph)
    assert not violations, "the LP solver layer imports beyond its floor:\n" + "\n".join(violations)


def test_the_lp_mechanisms_use_the_lp_layer() -> None:
    graph = import_graph()
    for mechanism in ("metricdp.mechanisms.optimal", "metricdp.mechanisms.spanner", "metricdp.mechanisms.constopt.fit"):
        assert any(_group(t) == "lp" for t in graph[mechanism]), mechanism


def test_every_top_level_module_has_a_floor() -> None:
    groups = {_group(m) for m in import_graph()} - {""}
    unplaced = sorted(g for g in groups if _floor(g) < 0)
    assert not unplaced, f"place these in FLOORS (tests/test_imports.py): {unplaced}"


def test_no_module_imports_a_higher_floor() -> None:
    violations = layer_violations(import_graph())
    assert not violations, "imports above the importer's floor:\n" + "\n".join(violations)


def test_every_submodule_is_reachable_as_an_attribute() -> None:
    """``pkg.module`` gives the module without importing it first (a fresh interpreter walks the tree)."""
    import subprocess
    import sys

    script = """
import importlib, pkgutil, sys
import metricdp
bad = []
def walk(pkg):
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        full = f"{pkg.__name__}.{info.name}"
        try:
            mod = getattr(pkg, info.name)
        except ModuleNotFoundError as ex:  # an optional dependency that is not installed
            if (ex.name or "").startswith("metricdp"):
                raise
            continue
        except AttributeError:
            bad.append(full)
            continue
        if mod is not sys.modules.get(full):
            bad.append(full + " (bound to something else)")
        elif info.ispkg:
            walk(mod)
walk(metricdp)
print("\\n".join(bad))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={**__import__("os").environ, "PYTHONPATH": str(SRC.parent)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", "not reachable as attributes:\n" + result.stdout
