"""``metricdp bench privatize --persons P [--quick]``: the command line of :mod:`metricdp.experiments.bench_ledger`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ..errors import ValidationError
from ..experiments.bench_ledger import (
    QUICK_PERSONS,
    QUICK_POINTS,
    QUICK_ROWS,
    LedgerRow,
    markdown_table,
    run_ledger_bench,
)
from ..io import atomic_write
from ._common import check_output, err_console

__all__ = ["cli"]


def cli(rows: str, persons: int | None, formats: str, workdir: Path, timeout: float, points: int, out: Path | None,
        quick: bool) -> None:
    """``metricdp bench privatize --persons P [--quick]``: run, print the table, write ``out`` with the load."""
    if out is not None:
        check_output(out)
    if quick:
        row_list, persons, fmt_list, points = [QUICK_ROWS], persons or QUICK_PERSONS, ["csv"], QUICK_POINTS
    else:
        try:
            row_list = [int(x) for x in rows.split(",") if x.strip()]
        except ValueError:
            raise ValidationError(f"--rows takes integers, got {rows!r}") from None
        fmt_list = [f.strip() for f in formats.split(",") if f.strip()]
    bad = [f for f in fmt_list if f not in ("csv", "parquet")]
    if bad or not fmt_list:
        raise ValidationError(f"--formats: unknown {', '.join(bad) or 'nothing'}; choose from csv, parquet")
    assert persons is not None

    def on_row(r: LedgerRow) -> None:
        err_console.print(f"{r.format} {r.rows:,} rows, {r.persons:,} persons: plain {r.plain_seconds:.1f} s, "
                          f"ledger {r.ledger_seconds:.1f} s ({r.ratio:.2f}x), peak RSS {r.plain_rss_mib:,.0f} -> "
                          f"{r.ledger_rss_mib:,.0f} MiB ({r.status})", markup=False, highlight=False)

    table = markdown_table(run_ledger_bench(row_list, persons, fmt_list, workdir, timeout=timeout, points=points,
                                            on_row=on_row))
    typer.echo(table)
    if out is not None:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        with atomic_write(out, "w") as fh:
            fh.write(f"{table}\n\nload average at the end: {load}\n")
