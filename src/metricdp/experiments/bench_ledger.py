"""``metricdp bench privatize --persons P``: what per-person accounting with a ledger costs a release.

The target: the overhead of the ledger on a ``privatize`` of N rows of P persons
(20M rows, 1M persons: under 1.5x the run without a ledger, memory still bounded). A file
of N rows (``user``, ``word``: a person drawn uniformly from P ids ``u0000000``..., a word
uniformly from the labels of the 1,000-point mechanism of :mod:`.bench_privatize`) is released
twice, each command a fresh process (seconds end to end, peak RSS from ``/usr/bin/time -v``):

* **plain** -- ``privatize --column word --drop user``;
* **ledger** -- the same with ``--user-column user --budget B --ledger L`` (a fresh SQLite
  ledger each time, ``B`` large enough that nobody is refused: the cost measured is the
  first pass, the plan, the ledger's reservation of every person and the commit).

The table gives both and their ratio (seconds and peak RSS).
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from .bench_privatize import _CLI, _GEN_CHUNK, N_POINTS, _measure, make_mechanism

__all__ = ["LedgerRow", "make_person_inputs", "markdown_table", "run_ledger_bench"]

#: ``--quick``: the smoke size a test runs.
QUICK_ROWS, QUICK_PERSONS, QUICK_POINTS = 20_000, 1_000, 50


@dataclass(frozen=True)
class LedgerRow:
    """One (format, rows, persons): the plain and the accounted command."""

    format: str
    rows: int
    persons: int
    plain_seconds: float
    ledger_seconds: float
    plain_rss_mib: float
    ledger_rss_mib: float
    status: str = "ok"

    @property
    def ratio(self) -> float:
        return self.ledger_seconds / self.plain_seconds

    @property
    def rss_ratio(self) -> float:
        return self.ledger_rss_mib / self.plain_rss_mib

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "rss_ratio": self.rss_ratio}


def make_person_inputs(workdir: Path, rows: int, persons: int, fmt: str, n: int = N_POINTS, seed: int = 0) -> Path:
    """``workdir/persons-ROWS-PERSONS-N.FMT`` with columns ``user`` (text) and ``word`` (a label), made once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = workdir / f"persons-{rows}-{persons}-{n}.{fmt}"
    if path.exists():
        return path
    g = np.random.default_rng(seed)
    vocab = np.array([f"w{i:04d}" for i in range(n)])
    tmp = path.with_name(path.name + ".partial")
    if fmt == "csv":
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write("user,word\n")
            for start in range(0, rows, _GEN_CHUNK):
                k = min(_GEN_CHUNK, rows - start)
                users = np.char.add("u", np.char.zfill(g.integers(0, persons, k).astype(str), 7))
                fh.write("\n".join(np.char.add(np.char.add(users, ","), vocab[g.integers(0, n, k)]).tolist()) + "\n")
    elif fmt == "parquet":
        schema = pa.schema([("user", pa.string()), ("word", pa.string())])
        with pq.ParquetWriter(tmp, schema) as writer:
            for start in range(0, rows, _GEN_CHUNK):
                k = min(_GEN_CHUNK, rows - start)
                users = np.char.add("u", np.char.zfill(g.integers(0, persons, k).astype(str), 7))
                writer.write_table(pa.table({"user": users.tolist(), "word": vocab[g.integers(0, n, k)].tolist()},
                                            schema=schema))
    else:
        raise ValidationError(f"format must be csv or parquet, got {fmt!r}")
    tmp.rename(path)
    return path


def run_ledger_bench(
    rows: list[int],
    persons: int,
    formats: list[str],
    workdir: Path,
    *,
    timeout: float = 1800.0,
    points: int = N_POINTS,
    on_row: Any = None,
) -> list[LedgerRow]:
    """Measure the plain and the accounted release of every (format, rows); see the module docstring."""
    from .._validation import check_int

    rows = [check_int(n, "rows", minimum=1) for n in rows]
    persons = check_int(persons, "persons", minimum=1)
    points = check_int(points, "points", minimum=2)
    if not (0 < timeout <= 1e7):
        raise ValidationError(f"timeout must be in (0, 1e7] seconds, got {timeout}")
    workdir.mkdir(parents=True, exist_ok=True)
    mech = make_mechanism(workdir / f"mechanism-{points}.npz", points)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    src = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    out_rows = []
    for fmt in formats:
        for n in rows:
            data = make_person_inputs(workdir, n, persons, fmt, points)
            out = workdir / f"out-ledger-{n}.{fmt}"
            base = [sys.executable, "-c", _CLI, "privatize", str(mech), str(data), "--column", "word", "--out",
                    str(out), "--drop", "user"]
            measured = []
            for extra in ([], ["--user-column", "user", "--budget", "1e6", "--ledger", str(workdir / "bench.db")]):
                for stale in (workdir / "bench.db", workdir / "bench.db.key", workdir / "bench.db-wal",
                              workdir / "bench.db-shm"):
                    stale.unlink(missing_ok=True)
                measured.append(_measure(base + extra, env, timeout))
                out.unlink(missing_ok=True)
            (s0, r0, st0, _), (s1, r1, st1, _) = measured
            status = "ok" if st0 == st1 == "ok" else f"plain: {st0}; ledger: {st1}"
            row = LedgerRow(fmt, n, persons, s0, s1, r0, r1, status)
            out_rows.append(row)
            if on_row is not None:
                on_row(row)
    return out_rows


def markdown_table(rows: list[LedgerRow]) -> str:
    """The rows as a markdown table: seconds and peak RSS without and with the ledger, and the ratios."""
    lines = ["| format | rows | persons | seconds plain | seconds ledger | ratio | peak RSS plain (MiB) "
             "| peak RSS ledger (MiB) | RSS ratio | status |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r.format} | {r.rows:,} | {r.persons:,} | {r.plain_seconds:.1f} | {r.ledger_seconds:.1f} | "
                     f"{r.ratio:.2f} | {r.plain_rss_mib:,.0f} | {r.ledger_rss_mib:,.0f} | {r.rss_ratio:.2f} | "
                     f"{r.status} |")
    return "\n".join(lines)

