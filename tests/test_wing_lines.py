"""benchmarks/wing_lines.py counts every line and the code lines (no blank, comment or docstring line) of the wing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "wing_lines.py"


def _script():
    spec = importlib.util.spec_from_file_location("wing_lines", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = '''"""A module
docstring."""

# a comment
X = 1  # code with a comment


def f(a):
    """One line."""
    return (a +
            1)
'''


def test_code_lines_leave_out_blanks_comments_and_docstrings():
    assert _script().count(SOURCE) == (11, 4)  # X = 1, def f, return and its continuation


def test_the_table_totals_the_parts_beside_a_baseline(tmp_path, capsys):
    for tree, body in (("new", "X = 1\nY = 2\n"), ("old", "X = 1\n")):
        (tmp_path / tree / "metricdp" / "streaming").mkdir(parents=True)
        (tmp_path / tree / "metricdp" / "streaming" / "a.py").write_text(body)
    _script().main([str(tmp_path / "new"), "--baseline", str(tmp_path / "old")])
    rows = capsys.readouterr().out.splitlines()
    assert "| streaming/**/*.py | 1 | 2 | 2 | 1 | 1 | +1 |" in rows
    assert rows[-1] == "| total | 1 | 2 | 2 | 1 | 1 | +1 |"
