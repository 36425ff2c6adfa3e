"""``metricdp bench privatize``: end-to-end throughput and peak memory of ``metricdp privatize``.

The setting: a 1,000-point mechanism (the exponential mechanism on 1,000
Gaussian points in 5 dimensions, audited by :func:`~metricdp.mechanisms.base.certify`),
a two-column file (``id``, ``word``) of N rows with words drawn uniformly from the
labels, in CSV and Parquet, and ``metricdp privatize`` run as a fresh process for each
(format, rows, engine):

* seconds = wall time of the whole command (interpreter start, loading and auditing the
  mechanism, cluster start for the engines, reading, releasing, writing, renaming);
* rows/s = N / seconds; "rows/s of the release" is the command's own figure, timed
  after the interpreter started and the mechanism file was loaded and audited;
* peak RSS = ``Maximum resident set size`` from ``/usr/bin/time -v`` when it exists
  (otherwise the child's ``ru_maxrss`` from :func:`os.wait4`): the largest single
  process of the command (for Dask and Spark: the client, a worker or the JVM, whichever
  is largest -- not their sum).

Input files are generated once per (format, rows) in ``workdir`` and reused.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = ["PrivatizeRow", "make_inputs", "make_mechanism", "markdown_table", "run_privatize_bench"]

N_POINTS = 1000
_GEN_CHUNK = 1_000_000
_CLI = "import sys; from metricdp.cli import main; sys.argv[0] = 'metricdp'; main()"


@dataclass(frozen=True)
class PrivatizeRow:
    """One measured command."""

    format: str
    rows: int
    engine: str
    seconds: float
    rows_per_s: float
    peak_rss_mib: float
    status: str = "ok"
    #: rows/s of the release itself as the command reports it (after start-up and the mechanism's audit)
    work_rows_per_s: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_mechanism(path: Path, n: int = N_POINTS, seed: int = 0) -> Path:
    """The benchmark's mechanism file (exponential mechanism, eps = 1, n Gaussian points)."""
    from ..mechanisms.base import certify
    from ..spaces import MetricSpace

    if path.exists():
        return path
    g = np.random.default_rng(seed)
    space = MetricSpace.from_points(g.normal(size=(n, 5)), [f"w{i:04d}" for i in range(n)])
    logits = -1.0 * np.asarray(space.distances) / 2
    m = np.exp(logits - logits.max(axis=1, keepdims=True))
    certify(m / m.sum(axis=1, keepdims=True), space, 1.0, "exponential").save(path)
    return path


def make_inputs(workdir: Path, rows: int, fmt: str, n: int = N_POINTS, seed: int = 0) -> Path:
    """``workdir/data-ROWS.FMT`` with columns ``id`` (int) and ``word`` (a label), made once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = workdir / f"data-{rows}-{n}.{fmt}"
    if path.exists():
        return path
    g = np.random.default_rng(seed)
    vocab = np.array([f"w{i:04d}" for i in range(n)])
    tmp = path.with_name(path.name + ".partial")
    if fmt == "csv":
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write("id,word\n")
            for start in range(0, rows, _GEN_CHUNK):
                k = min(_GEN_CHUNK, rows - start)
                ids = np.arange(start, start + k).astype(str)
                words = vocab[g.integers(0, n, k)]
                fh.write("\n".join(np.char.add(np.char.add(ids, ","), words).tolist()) + "\n")
    elif fmt == "parquet":
        schema = pa.schema([("id", pa.int64()), ("word", pa.string())])
        with pq.ParquetWriter(tmp, schema) as writer:
            for start in range(0, rows, _GEN_CHUNK):
                k = min(_GEN_CHUNK, rows - start)
                words = vocab[g.integers(0, n, k)]
                writer.write_table(pa.table({"id": np.arange(start, start + k), "word": words.tolist()}, schema=schema))
    else:
        raise ValidationError(f"format must be csv or parquet, got {fmt!r}")
    tmp.rename(path)
    return path


def _measure(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, float, str, float]:
    """(seconds, peak RSS MiB, status, the command's own rows/s) of one command."""
    timer = shutil.which("time") and Path("/usr/bin/time").exists()
    full = ["/usr/bin/time", "-v", *cmd] if timer else cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return time.perf_counter() - t0, float("nan"), f"timeout {timeout:.0f} s", float("nan")
    seconds = time.perf_counter() - t0
    rss = float("nan")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    if match:
        rss = int(match.group(1)) / 1024
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {(err.strip().splitlines() or [''])[-1][:200]}"
    work = re.search(r"([\d,]+) rows/s", out)
    return seconds, rss, status, float(work.group(1).replace(",", "")) if work else float("nan")


def run_privatize_bench(
    rows: list[int],
    formats: list[str],
    engines: list[str],
    workdir: Path,
    *,
    timeout: float = 1800.0,
    points: int = N_POINTS,
    keep_outputs: bool = False,
    on_row: Any = None,
) -> list[PrivatizeRow]:
    """Measure every (format, rows, engine); see the module docstring."""
    from .._validation import check_int

    rows = [check_int(n, "rows", minimum=1) for n in rows]
    points = check_int(points, "points", minimum=2)
    if not (0 < timeout <= 1e7):  # also refuses nan; subprocess deadlines need finite seconds
        raise ValidationError(f"timeout must be in (0, 1e7] seconds, got {timeout}")
    workdir.mkdir(parents=True, exist_ok=True)
    mech = make_mechanism(workdir / f"mechanism-{points}.npz", points)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    src = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    out_rows: list[PrivatizeRow] = []
    for fmt in formats:
        for n in rows:
            data = make_inputs(workdir, n, fmt, points)
            for engine in engines:
                out = workdir / f"out-{engine}-{n}.{fmt}"
                cmd = [sys.executable, "-c", _CLI, "privatize", str(mech), str(data), "--column", "word",
                       "--out", str(out), "--engine", engine]
                seconds, rss, status, work = _measure(cmd, env, timeout)
                row = PrivatizeRow(fmt, n, engine, seconds, n / seconds if status == "ok" else float("nan"), rss,
                                   status, work)
                out_rows.append(row)
                if on_row is not None:
                    on_row(row)
                if not keep_outputs and out.exists():
                    out.unlink()
    return out_rows


def markdown_table(rows: list[PrivatizeRow]) -> str:
    """The rows as a markdown table (engines' speed relative to local on the same file)."""
    local = {(r.format, r.rows): r.rows_per_s for r in rows if r.engine == "local" and r.status == "ok"}
    lines = [
        "| format | rows | engine | seconds | rows/s end to end | vs local | rows/s of the release | peak RSS (MiB) "
        "| status |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        base = local.get((r.format, r.rows))
        ratio = f"{base / r.rows_per_s:.2f}x slower" if base and r.rows_per_s == r.rows_per_s and r.engine != "local" \
            else ""
        lines.append(
            f"| {r.format} | {r.rows:,} | {r.engine} | {r.seconds:.1f} | {r.rows_per_s:,.0f} | {ratio} | "
            f"{r.work_rows_per_s:,.0f} | {r.peak_rss_mib:,.0f} | {r.status} |"
        )
    return "\n".join(lines)
