"""``metricdp bench privatize-points``: rows/s and peak RSS of ``privatize-points``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ._common import check_output, err_console, handle_errors

__all__ = ["add_points"]


def add_points(bench_app: typer.Typer) -> None:
    """Add ``bench privatize-points`` to the ``bench`` group."""

    @bench_app.command("privatize-points")
    @handle_errors
    def privatize_points_bench(
        rows: Annotated[str, typer.Option("--rows", help="Row counts, comma-separated (up to 20M and more).")]
        = "2000000,20000000",
        formats: Annotated[str, typer.Option("--formats", help="csv, parquet, or csv,parquet for both.")] = "csv",
        samplers: Annotated[str, typer.Option("--samplers", help="exact, float, or exact,float for both.")] = "exact",
        workdir: Annotated[
            Path, typer.Option("--workdir", help="Where the inputs are generated (kept) and outputs written.")
        ] = Path("bench-points"),
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds per command.")] = 3600.0,
        quick: Annotated[bool, typer.Option("--quick", help="Smoke run: 2,000 and 20,000 rows, CSV and Parquet.")]
        = False,
        out: Annotated[Path | None, typer.Option("--out", "-o", dir_okay=False, help="Also write the table here.")]
        = None,
    ) -> None:
        """Throughput (rows/s) and peak memory of ``metricdp privatize-points`` on a GPS log of N rows.

        Every command in a fresh process, peak RSS from /usr/bin/time -v; the table and the
        memory flatness (largest / smallest peak over the row counts) go to stdout (markdown).
        """
        from ..experiments import bench_points as bp
        from ..io import atomic_write

        if out is not None:
            check_output(out)
        if quick:
            rows, formats = "2000,20000", "csv,parquet"
        try:
            row_list = [int(x) for x in rows.split(",") if x.strip()]
        except ValueError:
            raise ValidationError(f"--rows takes integers, got {rows!r}") from None
        fmt_list = [x.strip() for x in formats.split(",") if x.strip()]
        bad = [x for x in fmt_list if x not in ("csv", "parquet")]
        if bad or not fmt_list:
            raise ValidationError(f"--formats: unknown {', '.join(bad) or '(none)'}; choose from csv, parquet")
        sampler_list = [x.strip() for x in samplers.split(",") if x.strip()]

        def on_row(row: bp.PointsRow) -> None:
            err_console.print(
                f"{row.format} {row.rows:,} rows {row.sampler}: {row.seconds:.1f} s, {row.rows_per_s:,.0f} rows/s, "
                f"peak RSS {row.peak_rss_mib:,.0f} MiB ({row.status})", markup=False, highlight=False,
            )

        result = bp.run_points_bench(row_list, fmt_list, sampler_list, workdir, timeout=timeout, on_row=on_row)
        table = bp.markdown_table(result)
        typer.echo(table)
        if out is not None:
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            with atomic_write(out, "w") as fh:
                fh.write(f"{table}\n\nload average at the end: {load}\n")
        if any(r.status != "ok" for r in result):
            raise ValidationError("some commands failed (see the status column)")
