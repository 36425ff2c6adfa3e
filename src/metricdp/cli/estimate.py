"""``metricdp estimate MECH.npz RELEASED.csv --column COL [--true TRUE.csv] [--intervals 0.95] [--out FILE.csv]``.

The collector's side of local mDP: estimate the distribution of the true values from the
released ones (IBU or matrix inversion) and, given the true data, measure the Earth
mover's distance of the estimate. With ``--intervals``, each probability comes with its
confidence interval (:mod:`metricdp.intervals`) and the total-variation and Earth mover's
distances to the truth with an upper confidence bound.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from .._optional import require
from ..errors import ValidationError
from ..estimation import IBU_MAX_ITER, IBU_MAX_ITER_LIMIT, IBU_TOL, counts_from_indices, emd, ibu, matrix_inversion
from ..intervals import DRAWS, Estimate, ibu_intervals, inversion_intervals
from ..io import atomic_write, read_csv_table
from ..mechanisms.file import load_mechanism
from ..outputs import OutputSet
from ..spaces import MetricSpace
from ..tabular.formats import format_of
from ._common import JsonOption, check_output, console, echo_json, err_console, handle_errors, progress, warn

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


def _csv_text(labels: tuple[str, ...], p: np.ndarray, bands: Estimate | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if bands is None:
        w.writerow(["label", "probability"])
        w.writerows([lab, repr(float(v))] for lab, v in zip(labels, p, strict=True))
    else:
        w.writerow(["label", "probability", "lower", "upper"])
        w.writerows([lab, repr(float(v)), repr(float(lo)), repr(float(hi))]
                    for lab, v, lo, hi in zip(labels, p, bands.lower, bands.upper, strict=True))
    return buf.getvalue()


def _json(labels: tuple[str, ...], p: np.ndarray, bands: Estimate | None, distance: float | None) -> dict:
    """The estimate (and its intervals and bounds) as one JSON object."""
    obj: dict = {"labels": list(labels), "probability": p.tolist()}
    if bands is not None:
        obj.update(lower=bands.lower.tolist(), upper=bands.upper.tolist(), level=bands.level,
                   tv_bound=bands.tv, emd_bound=bands.emd, interval_method=bands.method)
    if distance is not None:
        obj["emd"] = distance
    return obj


def _plot(path: Path, labels: tuple[str, ...], p: np.ndarray, bands: Estimate | None, truth: np.ndarray | None,
          method: str) -> None:
    """A PNG of the estimate per label, with the intervals as error bars and the truth when known."""
    from .._figure import new_figure, save_png

    fig = new_figure(max(4.0, 0.5 * len(labels) + 2.0), 3.2)
    ax = fig.add_subplot()
    x = np.arange(len(labels))
    if bands is None:
        ax.plot(x, p, "o", label=f"estimate ({method})")
    else:
        ax.errorbar(x, p, yerr=[np.clip(p - bands.lower, 0, None), np.clip(bands.upper - p, 0, None)], fmt="o",
                    capsize=3, label=f"estimate ({method}), {100 * bands.level:g} % intervals")
    if truth is not None:
        ax.scatter(x, truth, marker="_", s=300, color="black", label="true distribution", zorder=3)
    ax.set_xticks(x, labels, rotation=90 if len(labels) > 12 else 0)
    ax.set_ylabel("probability")
    ax.legend(fontsize=8)
    save_png(fig, path)


def _bound_lines(bands: Estimate) -> list[str]:
    """The distance bounds of ``bands`` as summary lines."""
    pct = f"{100 * bands.level:g} %"
    lines = [f"tv to the truth <= {bands.tv!r} ({pct} confidence, {bands.method})"]
    if bands.emd is not None:
        lines.append(f"emd to the truth <= {bands.emd!r} ({pct} confidence, {bands.method})")
    return lines


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
        level: Annotated[
            float | None,
            typer.Option("--intervals", metavar="LEVEL",
                         help="Add confidence intervals at this level (e.g. 0.95): lower,upper columns and "
                              "bounds on the TV and EMD to the truth."),
        ] = None,
        draws: Annotated[
            int, typer.Option("--draws", help="--intervals: bootstrap (ibu) or Gaussian (inversion) draws.")
        ] = DRAWS,
        seed: Annotated[
            int | None, typer.Option("--seed", help="--intervals: seed of the draws (default: fresh).")
        ] = None,
        plot: Annotated[
            Path | None,
            typer.Option("--plot", dir_okay=False, help="Write a PNG of the estimate (error bars with --intervals)."),
        ] = None,
        json_: JsonOption = False,
    ) -> None:
        """Estimate the distribution of the true values from released ones (CSV label,probability).

        With --true, also print the Earth mover's distance between the estimate and the
        true values' distribution (on stderr when the CSV goes to stdout). With
        --intervals 0.95, add lower,upper columns (95 % confidence intervals: a parametric
        bootstrap for ibu, the normal approximation for inversion) and print upper
        confidence bounds on the TV and Earth mover's distances to the truth. --json prints
        one JSON object instead (the CSV still goes to --out); --plot draws the estimate
        with its intervals as error bars (and the truth with --true).
        """
        if method not in ("ibu", "inversion"):
            raise ValidationError(f"--method must be 'ibu' or 'inversion', got {method!r}")
        max_iter = _max_iter(max_iter_text)
        if level is None and (seed is not None or draws != DRAWS):
            raise ValidationError("--draws and --seed set the draws of --intervals: give --intervals LEVEL too")
        if out is not None:
            check_output(out, inputs=(mechanism_file, released, true_file, plot))
        if plot is not None:
            check_output(plot, "--plot", inputs=(mechanism_file, released, true_file, out))
            require("plot", what="--plot")
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
        bands = None
        if level is not None:
            with progress(f"confidence intervals at {level:g} ({draws} draws)"):
                if method == "ibu":
                    bands = ibu_intervals(counts, mech, level=level, draws=draws, rng=seed, tol=tol,
                                          max_iter=max_iter)
                else:
                    bands = inversion_intervals(counts, mech, level=level, draws=draws, rng=seed)
        text = _csv_text(mech.labels, p, bands)
        summary = ([] if bands is None else _bound_lines(bands)) + ([] if distance is None else [f"emd {distance!r}"])
        if plot is not None:
            _plot(plot, mech.labels, p, bands, truth, method)
        if out is not None:
            with atomic_write(out, "w") as fh:
                fh.write(text)
        if json_:
            echo_json(_json(mech.labels, p, bands, distance))
            return
        if out is None:
            typer.echo(text, nl=False)
            for line in summary:
                err_console.print(line, markup=False, highlight=False)
            return
        console.print(
            f"wrote {out}: distribution over {mech.n} labels from {int(counts.sum())} reports ({note})",
            markup=False,
            highlight=False,
        )
        for line in summary:
            console.print(line, markup=False, highlight=False)
