"""docs/location.md's end-to-end walk runs as written, and the numbers it quotes are the ones it gives.

The commands between ``<!-- walk`` and ``<!-- end walk -->`` are checked statically like
README's (real commands, real options, extras marked: :mod:`tests.test_readme`), then run
in order in one scratch directory, in-process; every number of the doc's table is
recomputed from the files they write (exact expectations from the matrices; observed
values from the released rows).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.cli_helpers import run
from tests.helpers import missing
from tests.test_readme import _resolve, invocations, marked_extras, needed_extras

DOC = Path(__file__).parents[1] / "docs" / "location.md"


def walk_lines() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- walk.*?-->\s*```sh\n(.*?)```\s*<!-- end walk -->", text, flags=re.S)
    assert block, "docs/location.md has no walk block"
    return [line for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


def test_walk_commands_are_real_and_marked():
    lines = walk_lines()
    assert len(lines) >= 6
    for line in lines:
        for args, _ in invocations(line):
            command, rest = _resolve(args)
            options = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
            for token in rest:
                if token.startswith("-") and not re.fullmatch(r"-\d.*", token):
                    assert token in options, f"{line!r}: no option {token}"
            assert not needed_extras(args) - marked_extras(line), line


def _quoted(name: str) -> list[str]:
    """The two values of the doc's table row ``| name | a | b |``."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^\| " + re.escape(name) + r" \| ([^|]+) \| ([^|]+) \|$", text, flags=re.M)
    assert m, name
    return [m.group(1).strip(), m.group(2).strip()]


def _same(quoted: str, value: float) -> bool:
    digits = len(quoted.replace(".", "").lstrip("0"))
    return f"{value:.{digits}g}" == f"{float(quoted):.{digits}g}"


@pytest.mark.slow
def test_walk_runs_and_gives_its_numbers(tmp_path, monkeypatch):
    from metricdp import load_mechanism
    from metricdp.cli.calibrate import read_prior
    from metricdp.location.binning import read_label_column

    monkeypatch.chdir(tmp_path)
    outputs = []
    for line in walk_lines():
        for args, _ in invocations(line):
            if missing(*needed_extras(args)):  # a step that needs an extra not installed here
                continue
            result = run(*args)
            assert result.exit_code == 0, f"{line}\n{result.output}"
            outputs.append(result.stdout)
    text = "\n".join(outputs)
    assert "wrote cells.csv: 256 cells of 1000 m" in text
    assert "300 rows binned, 228 outside dropped" in text
    # the walk releases with plr.npz; the table's other column uses pl.npz with the same seed
    assert run("privatize", "pl.npz", "rows.csv", "--column", "cell", "--drop", "lat", "--drop", "lon", "--keep",
               "user", "--keep", "time", "--keep", "city", "--out", "released-pl.csv", "--seed", "7").exit_code == 0
    table = {k: _quoted(k) for k in (
        "audited ε", "mean displacement under the prior (km)",
        "heat-map total variation, true vs released, under the prior", "mean displacement, observed rows (km)",
        "heat-map total variation, observed rows")}
    for col, (mfile, released) in enumerate((("pl.npz", "released-pl.csv"), ("plr.npz", "released.csv"))):
        mech = load_mechanism(mfile)
        prior = read_prior("prior.csv", mech.labels)
        assert prior is not None
        d, m = np.asarray(mech.distances), np.asarray(mech.matrix)
        t = read_label_column("rows.csv", "cell", mech.labels)
        r = read_label_column(released, "cell", mech.labels)
        ht, hr = np.bincount(t, minlength=mech.n) / len(t), np.bincount(r, minlength=mech.n) / len(r)
        got = {
            "audited ε": mech.audit().epsilon,
            "mean displacement under the prior (km)": float((prior[:, None] * m * d).sum()),
            "heat-map total variation, true vs released, under the prior":
                0.5 * float(np.abs(prior - prior @ m).sum()),
            "mean displacement, observed rows (km)": float(d[t, r].mean()),
            "heat-map total variation, observed rows": 0.5 * float(np.abs(ht - hr).sum()),
        }
        for name, value in got.items():
            assert _same(table[name][col], value), f"{name} ({mfile}): the doc says {table[name][col]}, got {value}"
