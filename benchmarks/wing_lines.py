"""Lines of the release wing: every line, and the code lines (no blank, comment or docstring line), per folder.

The wing is the release path: ``streaming/``, ``integrations/``, ``tabular/``, ``pipeline/``,
``text/rewrite.py``, ``text/accounted.py`` and the ``cli/privatize*.py`` commands. Given a source
tree (the folder holding ``metricdp/``), prints a markdown table; with ``--baseline`` another
tree's figures stand beside it, for instance an older commit's::

    mkdir -p /tmp/old && git archive COMMIT src | tar -x -C /tmp/old
    python benchmarks/wing_lines.py src --baseline /tmp/old/src
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from pathlib import Path

#: The wing, as globs under ``metricdp/``, each one row of the table.
PARTS: tuple[str, ...] = (
    "streaming/**/*.py",
    "integrations/**/*.py",
    "tabular/**/*.py",
    "pipeline/**/*.py",
    "text/rewrite.py",
    "text/accounted.py",
    "cli/privatize*.py",
)


def _docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers of every module, class and function docstring of ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str) and first.end_lineno is not None):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def count(source: str) -> tuple[int, int]:
    """``(all lines, code lines)`` of one module's ``source``: a code line holds a token that is no comment,
    outside a docstring."""
    code: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(source.splitlines()), len(code - _docstring_lines(ast.parse(source)))


def wing(src: Path) -> dict[str, tuple[int, int, int]]:
    """Per part of :data:`PARTS`: ``(files, all lines, code lines)`` under ``src/metricdp``."""
    root = src / "metricdp"
    if not root.is_dir():
        raise SystemExit(f"{src}: no metricdp/ package in it")
    table = {}
    for part in PARTS:
        files = sorted(root.glob(part))
        counts = [count(f.read_text(encoding="utf-8")) for f in files]
        table[part] = (len(files), sum(c[0] for c in counts), sum(c[1] for c in counts))
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, nargs="?", default=Path("src"), help="the tree holding metricdp/")
    parser.add_argument("--baseline", type=Path, help="another tree, counted beside it")
    args = parser.parse_args(argv)
    now = wing(args.src)
    old = wing(args.baseline) if args.baseline else None
    head = "| part | files | lines | code lines |"
    if old:
        head = "| part | files | lines | code lines | baseline lines | baseline code lines | code change |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    rows = [*now, "total"]
    total = tuple(sum(v[i] for v in now.values()) for i in range(3))
    old_total = tuple(sum(v[i] for v in old.values()) for i in range(3)) if old else None
    for part in rows:
        f, n, c = total if part == "total" else now[part]
        line = f"| {part} | {f} | {n:,} | {c:,} |"
        if old and old_total:
            _, on, oc = old_total if part == "total" else old[part]
            line += f" {on:,} | {oc:,} | {c - oc:+,} |"
        print(line)


if __name__ == "__main__":
    main()
