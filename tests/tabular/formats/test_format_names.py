"""The rule of the format layer: outside :mod:`metricdp.tabular.formats`, no function is named after a file format
and no code branches on a format's name; a format's ways are asked of its :class:`Format` (a header, a table,
an appended column, where a row is), found by the one suffix table."""

from __future__ import annotations

import ast
from pathlib import Path

import metricdp
from metricdp.tabular.formats import FORMATS, RELEASE_FORMATS, TABLE_FORMATS, format_of

PACKAGE = Path(metricdp.__file__).parent
LAYER = PACKAGE / "tabular" / "formats"

#: Every format of the layer by name (plain text's included: its name is the format module's).
NAMES = frozenset({*RELEASE_FORMATS, format_of("documents.txt")})
#: The suffixes the one table gives those formats (``.csv``, ``.parquet``, ...): comparing a suffix with one is
#: deciding the format outside the table.
SUFFIXES = frozenset(s for s, name in FORMATS.items() if name in NAMES)
#: Names that are also ordinary words ("text": a kind of value): a comparison counts when it is with a format.
WORDS = frozenset({"text"})

#: Modules that name formats but release no file of one. Each entry: (module, what it names, why).
ALLOWED: dict[str, str] = {
    # the benchmarks generate their inputs in the formats a run asks for, and write their results as records
    "experiments/bench_numbers.py": "the format of the generated input",
    "experiments/bench_ledger.py": "the format of the generated input",
    "experiments/bench_points.py": "the format of the generated input",
    "experiments/bench_privatize.py": "the format of the generated input",
    "experiments/_records.py": "write_csv and the 'text' rendering of result records",
    "cli/bench_numbers.py": "the formats a benchmark generates",
    "cli/bench_points.py": "the formats a benchmark generates",
    "cli/_bench_ledger.py": "the formats a benchmark generates",
    # files of one format by definition, that no release reads or writes
    "cli/estimate.py": "_csv_text: the estimate, a label,probability CSV",
    "location/region.py": "from_geojson: a region's polygon",
}


def _strings(node: ast.expr) -> list[str]:
    """The string constants of a comparison's side: the constant itself, or those of a tuple/list/set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def offences(source: str) -> list[str]:
    """Each function named after a format and each comparison with a format's name or suffix in ``source``,
    by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = node.name.lower().strip("_").split("_")
            if len(parts) > 1 and (parts[0] in NAMES - {"text"} or parts[-1] in NAMES - {"text"}):
                found.append(f"line {node.lineno}: def {node.name}")
        elif isinstance(node, ast.Compare):
            sides = (node.left, *node.comparators)
            of_format = any(w in ast.unparse(side).lower() for side in sides for w in ("fmt", "format"))
            named = [s for side in sides for s in _strings(side)
                     if s.lower() in SUFFIXES or (s in NAMES and (s not in WORDS or of_format))]
            if named and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                found.append(f"line {node.lineno}: a comparison with {named[0]!r}")
    return found


def test_no_format_names_outside_the_format_layer() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.is_relative_to(LAYER) or rel in ALLOWED:
            continue
        bad += [f"{rel}: {o}" for o in offences(path.read_text(encoding="utf-8"))]
    assert not bad, "ask the Format (metricdp.tabular.formats) instead:\n" + "\n".join(bad)


def test_every_allowed_module_still_names_a_format() -> None:
    """An entry whose module no longer offends goes: the list only shrinks."""
    stale = [rel for rel in ALLOWED if not offences((PACKAGE / rel).read_text(encoding="utf-8"))]
    assert not stale


def test_the_rule_catches_what_it_forbids() -> None:
    assert offences("def read_parquet(p): pass") == ["line 1: def read_parquet"]
    assert offences("def csv_header(p): pass") == ["line 1: def csv_header"]
    assert offences("if fmt == 'csv': pass") == ["line 1: a comparison with 'csv'"]
    assert offences("x = 'row' if fmt.name != \"jsonl\" else 'line'") == ["line 1: a comparison with 'jsonl'"]
    assert offences("ok = kind in ('parquet', 'npy')") == ["line 1: a comparison with 'parquet'"]
    assert offences("if fmt == 'npy': pass") == []  # a numpy array is no format of the layer
    assert offences("if fmt == 'text': pass") == ["line 1: a comparison with 'text'"]
    assert offences("if rule.kind in ('labels', 'text'): pass") == []  # a kind of value, not a format
    assert offences("def read_text(p): pass\ndef describe(): pass") == []
    assert offences("if p.suffix.lower() != '.csv': pass") == ["line 1: a comparison with '.csv'"]
    assert offences("ok = path.suffix in ('.parquet', '.npz')") == ["line 1: a comparison with '.parquet'"]
    assert offences("if plot.suffix.lower() != '.png': pass") == []  # an image, no format of the layer
    assert set(TABLE_FORMATS) <= NAMES
