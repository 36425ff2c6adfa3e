"""``metricdp bench privatize-numbers``: throughput of ``metricdp privatize-numbers``
(:mod:`metricdp.experiments.bench_numbers`); added to the ``bench`` group by :mod:`metricdp.cli.bench`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ._common import check_output, err_console, handle_errors

OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Write the markdown report here.")]


def _split(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValidationError(f"{what} must be a comma-separated list, got {text!r}")
    return items

__all__ = ["add_command"]

def add_command(bench_app: typer.Typer) -> None:
    """``metricdp bench privatize-numbers`` (:mod:`metricdp.experiments.bench_numbers`)."""

    @bench_app.command("privatize-numbers")
    @handle_errors
    def privatize_numbers(
        rows: Annotated[str, typer.Option("--rows", help="Row counts, comma-separated.")] = "2000000,20000000",
        formats: Annotated[str, typer.Option("--formats", help="csv, parquet, or csv,parquet.")] = "csv,parquet",
        mechanisms: Annotated[
            str, typer.Option("--mechanisms", help="clamped-geometric, discrete-laplace.")
        ] = "clamped-geometric,discrete-laplace",
        workdir: Annotated[Path, typer.Option("--workdir", help="Where the inputs are generated (kept).")] = Path(
            "bench-numbers"),
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds per command.")] = 1800.0,
        quick: Annotated[bool, typer.Option("--quick", help="2,000 rows: a smoke run (CI).")] = False,
        out: OutOpt = None,
    ) -> None:
        """Throughput (rows/s) and peak memory of ``metricdp privatize-numbers`` (target: 2M rows/s).

        Ages 0..99 in files of N rows (id, age), epsilon 0.1 per year; every command in a
        fresh process. The table goes to stdout (markdown), the load average with --out.
        """
        from ..experiments import bench_numbers as bn
        from ..io import atomic_write

        if out is not None:
            check_output(out)
        try:
            row_list = [int(x) for x in _split("2000" if quick else rows, "--rows")]
        except ValueError:
            raise ValidationError(f"--rows takes integers, got {rows!r}") from None
        fmt_list = _split(formats, "--formats")
        bad = [x for x in fmt_list if x not in ("csv", "parquet")]
        if bad:
            raise ValidationError(f"--formats: unknown {', '.join(bad)}; choose from csv, parquet")

        def on_row(row: bn.NumbersRow) -> None:
            err_console.print(
                f"{row.format} {row.rows:,} rows {row.mechanism}: {row.seconds:.1f} s, {row.rows_per_s:,.0f} rows/s, "
                f"peak RSS {row.peak_rss_mib:,.0f} MiB ({row.status})", markup=False, highlight=False,
            )

        try:
            result = bn.run_numbers_bench(row_list, fmt_list, _split(mechanisms, "--mechanisms"), workdir,
                                          timeout=timeout, on_row=on_row)
        except ValidationError as ex:
            raise ValidationError(f"--mechanisms/--rows: {ex}") from None
        table = bn.markdown_table(result)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        typer.echo(table)
        if out is not None:
            with atomic_write(out, "w") as fh:
                fh.write(f"{table}\n\nload average at the end: {load}\n")
