"""``metricdp estimate MECH.npz RELEASED.csv --column COL [--true TRUE.csv] [--out FILE.csv]``.

The collector's side of local mDP: estimate the distribution of the true values from the
released ones (IBU or matrix inversion) and, given the true data, measure the Earth
mover's distance of the estimate.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ..errors import ValidationError
from ..estimation import IBU_MAX_ITER, IBU_MAX_ITER_LIMIT, IBU_TOL, counts_from_indices, emd, ibu, matrix_inversion
from ..io import atomic_write, read_csv_table
from ..mechanisms.file import load_mechanism
from ..outputs import OutputSet
from ..spaces import MetricSpace
from ..tabular.formats import format_of
from ._common import check_output, console, err_console, handle_errors, progress, warn

__all__ = ["column_indices", "register"]


def column_indices(path: Path, column: str, space: MetricSpace | OutputSet, option: str = "--column") -> np.ndarray:
    """Indices into ``space`` (or an output set) of the values of one CSV column; errors name file and column.

    The file is read under the one CSV record definition (:func:`metricdp.tabular.csv.read_csv`).
    """
    format_of(path, ("csv",))
    header, rows, _ = read_csv_table(path)
    if column not in header:
        raise ValidationError(
            f"{path}: no column {column!r} ({option}); available: {', '.join(repr(h) for h in header)}"
        )
    if not rows:
        raise ValidationError(f"{path}: no rows")
    j = header.index(column)
    try:
        return space.index([row[j] for row in rows])
    except ValidationError as ex:
        raise ValidationError(f"{path}: column {column!r}: {ex}") from None


def _csv_text(labels: tuple[str, ...], p: np.ndarray) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["label", "probability"])
    w.writerows([lab, repr(float(v))] for lab, v in zip(labels, p, strict=True))
    return buf.getvalue()


def register(app: typer.Typer) -> None:
    """Add the ``estimate`` command to ``app``."""

    def _max_iter(text: str) -> int:
        """``--max-iter``: a whole number in [1, IBU_MAX_ITER_LIMIT] (``1e6`` too), else one error naming it."""
        try:
            value = Decimal(text.strip())
        except ArithmeticError:
            value = Decimal("NaN")
        if not value.is_finite():
            raise ValidationError(f"--max-iter must be a whole number of iterations, got {text!r}")
        if not 1 <= value <= IBU_MAX_ITER_LIMIT:
            raise ValidationError(f"--max-iter must be in [1, {IBU_MAX_ITER_LIMIT}], got {text!r}")
        if value != value.to_integral_value():
            raise ValidationError(f"--max-iter must be a whole number of iterations, got {text!r}")
        return int(value)

    @app.command("estimate")
    @handle_errors
    def estimate(
        mechanism_file: Annotated[Path, typer.Argument(metavar="MECH.npz", help="The releasing mechanism.")],
        released: Annotated[Path, typer.Argument(metavar="RELEASED.csv", help="CSV of released values.")],
        column: Annotated[str, typer.Option("--column", "-c", help="Column holding the released values.")],
        true_file: Annotated[
            Path | None,
            typer.Option("--true", metavar="TRUE.csv", help="CSV with the true values: report the EMD."),
        ] = None,
        true_column: Annotated[
            str | None, typer.Option("--true-column", help="Column of --true (default: --column).")
        ] = None,
        method: Annotated[
            str, typer.Option("--method", help="ibu (maximum likelihood) or inversion (projected).")
        ] = "ibu",
        tol: Annotated[float, typer.Option("--tol", help="IBU: stop when the L1 change is below.")] = IBU_TOL,
        max_iter_text: Annotated[str, typer.Option("--max-iter", metavar="N",
                                                   help="IBU: iteration cap (an integer >= 1).")] = str(IBU_MAX_ITER),
        out: Annotated[
            Path | None,
            typer.Option("--out", "-o", dir_okay=False, help="Write the CSV here (default: stdout)."),
        ] = None,
    ) -> None:
        """Estimate the distribution of the true values from released ones (CSV label,probability).

        With --true, also print the Earth mover's distance between the estimate and the
        true values' distribution (on stderr when the CSV goes to stdout).
        """
        if method not in ("ibu", "inversion"):
            raise ValidationError(f"--method must be 'ibu' or 'inversion', got {method!r}")
        max_iter = _max_iter(max_iter_text)
        if out is not None:
            check_output(out, inputs=(mechanism_file, released, true_file))
        mech = load_mechanism(mechanism_file)
        # releases are output labels: the output set's when the mechanism has one
        releases = mech.space if mech.outputs is None else mech.outputs
        counts = counts_from_indices(column_indices(released, column, releases), mech.m)
        truth = None
        if true_file is not None:
            true_idx = column_indices(true_file, true_column or column, mech.space, "--true-column")
            truth = counts_from_indices(true_idx, mech.n)
            truth /= truth.sum()
        with progress(f"estimating from {int(counts.sum())} reports ({method})"):
            if method == "ibu":
                res = ibu(counts, mech, tol=tol, max_iter=max_iter)
                p, note = res.estimate, f"{res.iterations} IBU iterations"
                if not res.converged:
                    warn(f"IBU hit the cap of {max_iter} iterations before the L1 change fell below {tol:g}")
            else:
                p, note = matrix_inversion(counts, mech), "matrix inversion, projected onto the simplex"
            distance = None if truth is None else emd(p, truth, mech.space)
        text = _csv_text(mech.labels, p)
        if out is None:
            typer.echo(text, nl=False)
            if distance is not None:
                err_console.print(f"emd {distance!r}", markup=False, highlight=False)
            return
        with atomic_write(out, "w") as fh:
            fh.write(text)
        console.print(
            f"wrote {out}: distribution over {mech.n} labels from {int(counts.sum())} reports ({note})",
            markup=False,
            highlight=False,
        )
        if distance is not None:
            console.print(f"emd {distance!r}", markup=False, highlight=False)
