"""``metricdp report MECH.npz --out report.html [--inputs LABEL,...] [--prior FILE] [--top K]
[--true ROWS --released RELEASED --column cell]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .._optional import require
from ..errors import ValidationError
from ..mechanisms.file import load_mechanism
from ..report import write_report
from ..settings import settings_for
from ..units import space_unit
from ._common import check_output, console, handle_errors, progress, read_label_values, warn

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    @handle_errors
    def report(
        mechanism_file: Annotated[Path, typer.Argument(metavar="MECH.npz", help="A mechanism file.")],
        out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="HTML file (written atomically).")],
        inputs: Annotated[
            str | None,
            typer.Option("--inputs", help="Comma-separated labels whose releases are mapped (2-d spaces)."),
        ] = None,
        prior: Annotated[
            Path | None, typer.Option("--prior", help="Prior (CSV label,prob or .npy): adds the adversary's error.")
        ] = None,
        top: Annotated[int, typer.Option("--top", min=1, help="Releases per row of the table (word spaces).")] = 5,
        quantile: Annotated[float, typer.Option("--quantile", help="Quantile of the loss and its bound.")] = 0.95,
        true_file: Annotated[
            Path | None, typer.Option("--true", metavar="FILE", help="Rows with their TRUE location labels (e.g. "
                                      "grid --labelled): with --released, heat maps and displacements of the data.")
        ] = None,
        released_file: Annotated[
            Path | None, typer.Option("--released", metavar="FILE", help="The same rows, released (privatize's "
                                      "output), in the same order.")
        ] = None,
        column: Annotated[str, typer.Option("--column", help="The label column of --true and --released.")] = "cell",
        key: Annotated[str | None, typer.Option(
            "--key", metavar="COL", help="A row id in both --true and --released: rows are paired by it (needed when "
            "the release withheld rows, e.g. by --max-rows-per-user), not by position.")] = None,
    ) -> None:
        """Write one self-contained HTML page: audited epsilon, eps_tight vs delta, losses and a picture."""
        require("plot", what="report")  # before the mechanism is loaded and audited
        if out.suffix.lower() not in (".html", ".htm"):
            raise ValidationError(f"--out {out}: expected an .html file")
        check_output(out, inputs=(mechanism_file, prior, true_file, released_file))
        mech = load_mechanism(mechanism_file)
        idx = None
        if inputs is not None:
            idx = mech.space.index([s.strip() for s in inputs.split(",") if s.strip()])
        pi = None
        if prior is not None:
            pi = read_label_values(prior, mech.labels, "--prior")
            total = float(pi.sum())
            if not (pi >= 0).all() or total <= 0:
                raise ValidationError(f"--prior {prior}: values must be >= 0 and not all 0")
            pi = pi / total
        observed = None
        if key is not None and true_file is None:
            raise ValidationError("--key pairs the rows of --true and --released: give both")
        if (true_file is None) != (released_file is None):
            raise ValidationError("--true and --released go together (the same rows, before and after release)")
        if true_file is not None and released_file is not None:
            from ..location.binning import read_label_column

            t, r = (read_label_column(f, column, mech.labels) for f in (true_file, released_file))
            if key is not None:
                t, r = _paired(true_file, t, released_file, r, key)
            elif len(t) != len(r) or not len(t):
                raise ValidationError(f"--true {true_file} has {len(t):,} rows and --released {released_file} "
                                      f"{len(r):,}: the same rows are needed, in the same order (or pair them by a "
                                      "row id with --key COL)")
            observed = (t, r)
            warn(f"{out} shows the TRUE locations of the rows of {true_file}: it is not a release; keep it private")
        settings = settings_for(mech.name, mech.epsilon, unit=space_unit(mech.space, mech.metadata), prior=prior,
                                input=mechanism_file)
        with progress(f"auditing and drawing {mech.name} (n = {mech.n})"):
            write_report(mech, out, inputs=idx, prior=pi, top=top, quantile=quantile, observed=observed,
                         settings=settings.text())
        console.print(settings.text(), end="", markup=False, highlight=False)
        console.print(f"wrote {out}: report of {mech.name} (n = {mech.n}, epsilon = {mech.epsilon:.6g})",
                      markup=False, highlight=False)
        if mech.space.policy:
            console.print(f"policy graph: {mech.space.n_components} components, cross-component pairs unprotected",
                          markup=False, highlight=False)


def _key_column(path: Path, key: str) -> list[str]:
    """Every row's ``key`` value as text (:func:`metricdp.tabular.formats.read_table`: a text format's values
    as they are, a typed format's written as text; a missing value is empty)."""
    from ..tabular.formats import read_table, table_format

    fmt = table_format(path)
    if key not in fmt.header(path):
        raise ValidationError(f"--key: {path} has no column {key!r}")
    values = read_table(path, fmt, [key]).columns[key].to_pylist()
    return ["" if v is None else str(v) for v in values]


def _paired(true_file: Path, t: Any, released_file: Path, r: Any, key: str) -> tuple[Any, Any]:
    """--key: the true and released rows paired by a row id (the library's match_rows), errors naming the files."""
    from ..report import match_rows

    tk, rk = _key_column(true_file, key), _key_column(released_file, key)
    try:
        paired_t, paired_r, withheld = match_rows(tk, t, rk, r)
    except ValidationError as ex:
        raise ValidationError(f"--key {key!r} (--true {true_file}, --released {released_file}): {ex}") from None
    if withheld:
        warn(f"{withheld:,} rows of {true_file} have no released row (withheld): left out of the comparison")
    return paired_t, paired_r
