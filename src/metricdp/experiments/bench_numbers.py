"""``metricdp bench privatize-numbers``: end-to-end throughput and peak memory of ``metricdp privatize-numbers``.

The setting: a file of N rows with columns ``id`` (int) and ``age`` (an integer
uniform on 0..99; in Parquet an int64 column), released on the grid 0..99 step 1 at
epsilon 0.1 per year by each mechanism (``clamped-geometric``, ``discrete-laplace``),
``metricdp privatize-numbers`` run as a fresh process per (format, rows, mechanism), ``id``
kept on purpose. Seconds, rows/s and peak RSS are measured exactly as in
:mod:`metricdp.experiments.bench_privatize` (wall time of the whole command, the
command's own rows/s of the release, ``/usr/bin/time -v``). Target: 2M rows/s
end to end.

Inputs are generated once per (format, rows) in ``workdir`` and reused.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from .bench_privatize import _CLI, _measure

__all__ = ["MECHANISMS", "NumbersRow", "make_inputs", "markdown_table", "run_numbers_bench"]

MECHANISMS = ("clamped-geometric", "discrete-laplace")
_GEN_CHUNK = 1_000_000
#: The throughput target, rows/s end to end.
TARGET_ROWS_PER_S = 2_000_000


@dataclass(frozen=True)
class NumbersRow:
    """One measured command."""

    format: str
    rows: int
    mechanism: str
    seconds: float
    rows_per_s: float
    peak_rss_mib: float
    status: str = "ok"
    work_rows_per_s: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_inputs(workdir: Path, rows: int, fmt: str, seed: int = 0) -> Path:
    """``workdir/ages-ROWS.FMT`` (``id``, ``age`` uniform on 0..99), made once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = workdir / f"ages-{rows}.{fmt}"
    if path.exists():
        return path
    g = np.random.default_rng(seed)
    tmp = path.with_name(path.name + ".partial")
    if fmt == "csv":
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write("id,age\n")
            for start in range(0, rows, _GEN_CHUNK):
                k = min(_GEN_CHUNK, rows - start)
                ids = np.arange(start, start + k).astype(str)
                ages = g.integers(0, 100, k).astype(str)
                fh.write("\n".join(np.char.add(np.char.add(ids, ","), ages).tolist()) + "\n")
    elif fmt == "parquet":
        schema = pa.schema([("id", pa.int64()), ("age", pa.int64())])
        with pq.ParquetWriter(tmp, schema) as writer:
            for start in range(0, rows, _GEN_CHUNK):
                k = min(_GEN_CHUNK, rows - start)
                writer.write_table(pa.table({"id": np.arange(start, start + k), "age": g.integers(0, 100, k)},
                                            schema=schema))
    else:
        raise ValidationError(f"format must be csv or parquet, got {fmt!r}")
    tmp.rename(path)
    return path


def run_numbers_bench(
    rows: list[int],
    formats: list[str],
    mechanisms: list[str],
    workdir: Path,
    *,
    epsilon: float = 0.1,
    timeout: float = 1800.0,
    on_row: Any = None,
) -> list[NumbersRow]:
    """Measure every (format, rows, mechanism); see the module docstring."""
    from .._validation import check_epsilon, check_int

    rows = [check_int(n, "rows", minimum=1) for n in rows]
    epsilon = check_epsilon(epsilon)
    bad = [m for m in mechanisms if m not in MECHANISMS]
    if bad:
        raise ValidationError(f"mechanisms: unknown {', '.join(bad)}; choose from {', '.join(MECHANISMS)}")
    if not (0 < timeout <= 1e7):
        raise ValidationError(f"timeout must be in (0, 1e7] seconds, got {timeout}")
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    src = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    out_rows: list[NumbersRow] = []
    for fmt in formats:
        for n in rows:
            data = make_inputs(workdir, n, fmt)
            for mech in mechanisms:
                out = workdir / f"out-numbers-{mech}-{n}.{fmt}"
                cmd = [sys.executable, "-c", _CLI, "privatize-numbers", str(data), "--column", "age",
                       "--epsilon", repr(epsilon), "--range", "0,99", "--mechanism", mech, "--keep", "id",
                       "--out", str(out)]
                seconds, rss, status, work = _measure(cmd, env, timeout)
                row = NumbersRow(fmt, n, mech, seconds, n / seconds if status == "ok" else float("nan"), rss,
                                 status, work)
                out_rows.append(row)
                if on_row is not None:
                    on_row(row)
                if out.exists():
                    out.unlink()
    return out_rows


def markdown_table(rows: list[NumbersRow]) -> str:
    """The rows as a markdown table, with the target met or not."""
    lines = [
        "| format | rows | mechanism | seconds | rows/s end to end | rows/s of the release | peak RSS (MiB) "
        "| 2M rows/s | status |",
        "|---|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        met = "" if r.status != "ok" else ("met" if r.rows_per_s >= TARGET_ROWS_PER_S else "not met")
        lines.append(
            f"| {r.format} | {r.rows:,} | {r.mechanism} | {r.seconds:.1f} | {r.rows_per_s:,.0f} | "
            f"{r.work_rows_per_s:,.0f} | {r.peak_rss_mib:,.0f} | {met} | {r.status} |"
        )
    return "\n".join(lines)
