"""``metricdp bench privatize-points``: end-to-end throughput and peak memory of ``metricdp privatize-points``.

The setting: a GPS log of N rows (``user``, ``time``, ``lat``, ``lon``; points
spread over about 20 km around Paris), in CSV and/or Parquet, and ``metricdp
privatize-points --epsilon 0.5/km --origin 48.8566,2.3522`` (the exact lattice sampler by
default; ``--sampler float`` for the continuous one) run as a fresh process for each
(format, rows, sampler):

* seconds = wall time of the whole command (interpreter start, tables, reading,
  releasing, writing, renaming); rows/s = N / seconds;
* "rows/s of the release" is the command's own figure (after start-up);
* peak RSS = ``Maximum resident set size`` from ``/usr/bin/time -v`` (else ``ru_maxrss``).

Memory is flat when peak RSS does not grow with N (:func:`flatness`: the ratio of the
largest to the smallest peak over the row counts of one format). Inputs are generated
once per (format, rows) in ``workdir`` and reused.
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

__all__ = ["PointsRow", "flatness", "make_points", "markdown_table", "run_points_bench"]

_GEN_CHUNK = 1_000_000
ORIGIN = (48.8566, 2.3522)


@dataclass(frozen=True)
class PointsRow:
    """One measured command."""

    format: str
    rows: int
    sampler: str
    seconds: float
    rows_per_s: float
    peak_rss_mib: float
    status: str = "ok"
    work_rows_per_s: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_points(workdir: Path, rows: int, fmt: str, seed: int = 0) -> Path:
    """``workdir/points-ROWS.FMT`` (user, time, lat, lon), made once, chunk by chunk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = workdir / f"points-{rows}.{fmt}"
    if path.exists():
        return path
    g = np.random.default_rng(seed)
    tmp = path.with_name(path.name + ".partial")
    schema = pa.schema([("user", pa.string()), ("time", pa.int64()), ("lat", pa.float64()), ("lon", pa.float64())])
    if fmt not in ("csv", "parquet"):
        raise ValidationError(f"format must be csv or parquet, got {fmt!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    writer: Any = None
    fh: Any = None
    try:
        if fmt == "csv":
            fh = tmp.open("w", encoding="utf-8")
            fh.write("user,time,lat,lon\n")
        else:
            writer = pq.ParquetWriter(tmp, schema)
        for start in range(0, rows, _GEN_CHUNK):
            k = min(_GEN_CHUNK, rows - start)
            user = g.integers(0, 100_000, k)
            lat = np.round(ORIGIN[0] + g.normal(0.0, 0.05, k), 6)
            lon = np.round(ORIGIN[1] + g.normal(0.0, 0.07, k), 6)
            if writer is None:
                np.savetxt(fh, np.column_stack([user, np.arange(start, start + k), lat, lon]),
                           fmt=["u%d", "%d", "%.6f", "%.6f"], delimiter=",")
            else:
                writer.write_table(pa.table({"user": np.char.add("u", user.astype(str)).tolist(),
                                             "time": np.arange(start, start + k), "lat": lat, "lon": lon},
                                            schema=schema))
    finally:
        if writer is not None:
            writer.close()
        if fh is not None:
            fh.close()
    tmp.rename(path)
    return path


def run_points_bench(
    rows: list[int],
    formats: list[str],
    samplers: list[str],
    workdir: Path,
    *,
    timeout: float = 1800.0,
    keep_outputs: bool = False,
    on_row: Any = None,
) -> list[PointsRow]:
    """Measure every (format, rows, sampler); see the module docstring."""
    from .._validation import check_int

    rows = [check_int(n, "rows", minimum=1) for n in rows]
    if not (0 < timeout <= 1e7):
        raise ValidationError(f"timeout must be in (0, 1e7] seconds, got {timeout}")
    bad = [s for s in samplers if s not in ("exact", "float")]
    if bad:
        raise ValidationError(f"samplers must be exact or float, got {', '.join(bad)}")
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    src = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    out_rows: list[PointsRow] = []
    for fmt in formats:
        for n in rows:
            data = make_points(workdir, n, fmt)
            for sampler in samplers:
                out = workdir / f"out-{sampler}-{n}.{fmt}"
                cmd = [sys.executable, "-c", _CLI, "privatize-points", str(data), "--lat", "lat", "--lon", "lon",
                       "--epsilon", "0.5/km", "--out", str(out), "--keep", "user", "--keep", "time",
                       "--sampler", sampler]
                if sampler == "exact":
                    cmd += ["--origin", f"{ORIGIN[0]},{ORIGIN[1]}"]
                seconds, rss, status, work = _measure(cmd, env, timeout)
                row = PointsRow(fmt, n, sampler, seconds, n / seconds if status == "ok" else float("nan"), rss,
                                status, work)
                out_rows.append(row)
                if on_row is not None:
                    on_row(row)
                if not keep_outputs and out.exists():
                    out.unlink()
    return out_rows


def flatness(rows: list[PointsRow]) -> dict[tuple[str, str], float]:
    """Largest / smallest peak RSS over the row counts, per (format, sampler): 1.0 is flat."""
    out: dict[tuple[str, str], float] = {}
    for key in {(r.format, r.sampler) for r in rows}:
        peaks = [r.peak_rss_mib for r in rows if (r.format, r.sampler) == key and r.status == "ok"]
        peaks = [p for p in peaks if p == p]
        if len(peaks) >= 2:
            out[key] = max(peaks) / min(peaks)
    return out


def markdown_table(rows: list[PointsRow]) -> str:
    """The rows as a markdown table, then the memory flatness per (format, sampler)."""
    lines = [
        "| format | rows | sampler | seconds | rows/s end to end | rows/s of the release | peak RSS (MiB) | status |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r.format} | {r.rows:,} | {r.sampler} | {r.seconds:.1f} | {r.rows_per_s:,.0f} | "
                     f"{r.work_rows_per_s:,.0f} | {r.peak_rss_mib:,.0f} | {r.status} |")
    flat = flatness(rows)
    if flat:
        lines.append("")
        lines.extend(f"peak RSS largest / smallest over the row counts ({fmt}, {s}): {ratio:.2f}"
                     for (fmt, s), ratio in sorted(flat.items()))
    return "\n".join(lines)
