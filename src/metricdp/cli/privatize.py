"""``metricdp privatize MECH.npz INPUT.csv --column COL --out OUTPUT.csv [--seed S]``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ..io import atomic_write
from ..mechanisms.file import load_mechanism
from ._common import OutOption, SeedOption, check_output, console, handle_errors, progress, warn

__all__ = ["read_table", "register"]


def read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV file (UTF-8, optional BOM); ragged rows are an error."""
    if not path.is_file():
        raise ValidationError(f"{path}: no such file")
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise ValidationError(f"{path}: empty file (no header row)")
        rows = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise ValidationError(
                    f"{path}: line {reader.line_num} has {len(row)} fields, expected {len(header)}"
                )
            rows.append(row)
    return header, rows


def register(app: typer.Typer) -> None:
    """Add the ``privatize`` command to ``app``."""

    @app.command("privatize")
    @handle_errors
    def privatize(
        mechanism_file: Annotated[Path, typer.Argument(metavar="MECH.npz", help="A mechanism file.")],
        input_file: Annotated[Path, typer.Argument(metavar="INPUT.csv", help="CSV file with a header row.")],
        column: Annotated[str, typer.Option("--column", "-c", help="Column whose values are released.")],
        out: OutOption,
        seed: SeedOption = None,
    ) -> None:
        """Replace each value of a column by a release of the mechanism; other columns are kept."""
        check_output(out)
        header, rows = read_table(input_file)
        if column not in header:
            raise ValidationError(
                f"{input_file}: no column {column!r}; available: {', '.join(repr(h) for h in header)}"
            )
        mech = load_mechanism(mechanism_file)
        j = header.index(column)
        try:
            inputs = mech.space.index([row[j] for row in rows])
        except ValidationError as ex:
            raise ValidationError(f"{input_file}: column {column!r}: {ex}") from None
        if seed is not None:
            warn(
                "--seed makes the releases reproducible by anyone who knows the seed: "
                "not private for real data"
            )
        with progress(f"releasing {len(rows)} values"):
            released = mech.sample(inputs, rng=seed)
            labels = mech.labels
            with atomic_write(out, "w") as fh:
                writer = csv.writer(fh, lineterminator="\n")
                writer.writerow(header)
                for row, k in zip(rows, released, strict=True):
                    row[j] = labels[k]
                    writer.writerow(row)
        console.print(
            f"wrote {out}: {len(rows)} values of {column!r} released by {mech.name} "
            f"(epsilon={mech.epsilon:.6g}){'' if seed is None else ' [seeded]'}",
            markup=False,
            highlight=False,
        )
