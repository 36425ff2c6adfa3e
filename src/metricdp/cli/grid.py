"""``metricdp grid IN --lat C --lon C --cell 500m --region R --out cells.csv``.

Bins (lat, lon) rows to the square cells of a public tiling of the region
(:mod:`metricdp.location.grid`: the azimuthal equidistant plane about the middle of the
region's bounding box, cells ``x{i}y{j}``), and writes

* ``--out``: the cells as a POINTS file (``label,lat,lon``, the centres), the space
  ``build`` builds a mechanism on; it depends on the region and the cell size only;
* ``--labelled``: the input with a cell-label column (streamed, CSV or Parquet), the
  input of ``privatize --column cell``; it keeps the TRUE coordinates (said on stderr);
* ``--prior-out`` with ``--prior-epsilon E``: an E-differentially private histogram of
  the rows per cell (exact two-sided geometric noise on each count, clamped, normalised),
  the ``--prior`` of ``build --remap`` and ``calibrate``. E is standard DP per row, not
  mDP: a person with k rows is protected at k E, and E adds to the budget of every
  release that uses the prior. With ``--user-column COL --max-rows-per-user K`` it is
  E-DP per PERSON (:mod:`metricdp.streaming.accounted_prior`): at most K rows of each
  person are counted, the noise is drawn at E / K, and each person is charged E once,
  against ``--budget`` or in a ``--ledger`` (whose unit is then standard DP: it never
  takes a charge in eps per km).

The region is required: a grid drawn around the data would reveal where the data are.
"""

from __future__ import annotations

import math
import time
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import PrivacyLeakWarning, ValidationError
from ._accounting import (
    AccountingOptions,
    BudgetOption,
    LedgerKeyOption,
    LedgerOption,
    MaxRowsOption,
    OverBudgetOption,
    UserColumnOption,
)
from ._common import JsonOption, SeedOption, check_output, console, echo_json, handle_errors, progress, warn

__all__ = ["register"]


class UnknownPolicy(StrEnum):
    refuse = "refuse"
    drop = "drop"
    nearest = "nearest"


def _cell_km(text: str) -> float:
    from ..units import METRES_PER, UnitError, parse_length

    try:
        value, unit = parse_length(text)
    except UnitError as ex:
        raise ValidationError(f"--cell: {ex}") from None
    if not unit:
        raise ValidationError(f"--cell {text!r} needs a unit: 500m or 0.5km")
    try:
        km = float(value * METRES_PER[unit] / 1000)
    except OverflowError:  # Fraction -> float past 1.8e308
        km = math.inf
    if not (math.isfinite(km) and km > 0):
        raise ValidationError(f"--cell {text!r} is not a cell side a float can hold")
    return km


def _prior_epsilon(text: str) -> float:
    """``--prior-epsilon`` by the CSV number rule: float() would read ``4_8`` as 48."""
    from ..io import parse_decimal

    try:
        return parse_decimal(text)
    except ValueError:
        raise ValidationError(f"--prior-epsilon must be a plain decimal number, got {text!r}") from None


def register(app: typer.Typer) -> None:
    """Add the ``grid`` command to ``app``."""

    @app.command("grid")
    @handle_errors
    def grid(
        input_file: Annotated[Path, typer.Argument(metavar="IN", help="CSV (with a header row) or Parquet file.")],
        cell: Annotated[str, typer.Option("--cell", help="Side of the square cells, with its unit: 500m, 0.5km.")],
        region: Annotated[
            str, typer.Option("--region", "-r", help="The area the grid covers: a named region (paris, ...), "
                              "LAT0,LON0,LAT1,LON1 or a GeoJSON file. Required: a grid drawn around the data "
                              "would reveal where they are.")
        ],
        out: Annotated[Path, typer.Option("--out", "-o", metavar="CELLS.csv",
                                          help="The cells as a POINTS file (label,lat,lon).")],
        lat: Annotated[str, typer.Option("--lat", metavar="COL", help="Latitude column (degrees).")] = "lat",
        lon: Annotated[str, typer.Option("--lon", metavar="COL", help="Longitude column (degrees).")] = "lon",
        labelled: Annotated[
            Path | None, typer.Option("--labelled", metavar="OUT", help="Write the input with a cell-label column "
                                      "(same format; true coordinates kept).")
        ] = None,
        cell_column: Annotated[str, typer.Option("--cell-column", help="Name of the cell-label column.")] = "cell",
        unknown: Annotated[
            UnknownPolicy, typer.Option("--unknown", case_sensitive=False,
                                        help="Rows outside the grid: refuse (an error), drop, or nearest cell.")
        ] = UnknownPolicy.refuse,
        prior_out: Annotated[
            Path | None, typer.Option("--prior-out", metavar="PRIOR.csv",
                                      help="Write a differentially private histogram prior (label,probability).")
        ] = None,
        prior_epsilon_text: Annotated[
            str | None, typer.Option("--prior-epsilon", metavar="FLOAT", help="Epsilon of the prior (standard DP "
                                     "per row; a person with k rows: k times it).")
        ] = None,
        chunk_rows: Annotated[int, typer.Option("--chunk-rows", min=1, help="Rows per chunk.")] = 1_000_000,
        seed: SeedOption = None,
        json: JsonOption = False,
        user_column: UserColumnOption = None,
        budget: BudgetOption = None,
        ledger: LedgerOption = None,
        ledger_key: LedgerKeyOption = None,
        max_rows_per_user: MaxRowsOption = None,
        over_budget: OverBudgetOption = None,
    ) -> None:
        """Bin lat/lon rows to square cells of a public grid; write the cells, the labelled rows, a DP prior.

        With --user-column and --max-rows-per-user K the prior is DP per person: at most K
        rows of each person are counted, the noise is scaled to K, and each person is
        charged --prior-epsilon once (--budget, --ledger, --over-budget as for a release).
        """
        from ..location.binning import bin_file
        from ..location.grid import MIN_PRIOR_EPSILON, CellGrid, private_prior, write_prior

        acct = AccountingOptions(user_column, budget, ledger, ledger_key, max_rows_per_user, over_budget)
        acct.check()
        if acct.active and prior_out is None:
            raise ValidationError(f"{', '.join(acct.given())}: the accounting options are for the prior "
                                  "(--prior-out)")
        if user_column is not None and max_rows_per_user is None:
            raise ValidationError("--user-column with --prior-out needs --max-rows-per-user K: the prior's noise is "
                                  "scaled to each person's K rows")
        prior_epsilon = None if prior_epsilon_text is None else _prior_epsilon(prior_epsilon_text)
        if (prior_out is None) != (prior_epsilon is None):
            raise ValidationError("--prior-out and --prior-epsilon go together")
        if prior_epsilon is not None and not (MIN_PRIOR_EPSILON <= prior_epsilon <= 1000):
            raise ValidationError(f"--prior-epsilon must be in [{MIN_PRIOR_EPSILON:g}, 1000], got {prior_epsilon!r}")
        if seed is not None and prior_out is None:
            raise ValidationError("--seed is for the prior's noise (--prior-out)")
        from ..tabular.formats import format_of

        for option, path in (("--out", out), ("--prior-out", prior_out)):
            if path is not None:  # written as CSV
                format_of(path, ("csv",), what=f"{option} {path}:")
        outs = [p for p in (out, labelled, prior_out) if p is not None]
        if len({p.resolve() for p in outs}) < len(outs):
            raise ValidationError("--out, --labelled and --prior-out must be different files")
        for option, path in (("--out", out), ("--labelled", labelled), ("--prior-out", prior_out)):
            if path is not None:
                check_output(path, option, inputs=[input_file, *[p for p in outs if p is not path], *acct.files()])
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        h = _cell_km(cell)
        t0 = time.perf_counter()
        with progress(f"grid over {region}") as bar:
            try:
                cells = CellGrid.over(region, h)
            except ValidationError as ex:
                raise ValidationError(f"--region {region}: {ex}") from None
            stats = None
            if labelled is not None or prior_out is not None:
                bar.update(f"binning {input_file}")
                stats = bin_file(cells, input_file, lat, lon, labelled, unknown=unknown.value,
                                 cell_column=cell_column, chunk_rows=chunk_rows, inputs=[out], progress=bar)
            noisy = None
            per_person = None
            published = [labelled] if labelled is not None else []
            try:  # the outputs are published one by one: a failure after the first takes back what was published
                if prior_out is not None and stats is not None and user_column is not None:
                    bar.update(f"the prior per person: {input_file}")
                    per_person = _per_person_prior(input_file, cells, lat, lon, repr(prior_epsilon), acct, prior_out,
                                                   [input_file, *acct.files()], unknown.value, seed, chunk_rows)
                    noisy = per_person.noisy
                    published.append(prior_out)
                elif prior_out is not None and stats is not None:
                    bar.update(f"drawing the prior's noise for {cells.n} cells")
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", PrivacyLeakWarning)  # said once below
                        prior, noisy = private_prior(stats.counts, repr(prior_epsilon), rng=seed)
                    write_prior(prior_out, cells.labels, prior, inputs=[input_file])
                    published.append(prior_out)
                cells.write_points(out, inputs=[input_file])
            except BaseException:
                for path in published:
                    path.unlink(missing_ok=True)
                raise
        dt = time.perf_counter() - t0
        if seed is not None:
            warn("--seed makes the prior's noise reproducible by anyone who knows the seed: not private for real data")
        if labelled is not None:
            warn(f"{labelled} holds the rows' TRUE coordinates ({lat!r}, {lon!r}) beside {cell_column!r}: release "
                 f"it with privatize --column {cell_column} --drop {lat} --drop {lon}")
        summary = {
            "out": str(out), "grid": cells.describe(), "labelled": None if labelled is None else str(labelled),
            "unknown": unknown.value, "seconds": dt,
        }
        if stats is not None:
            summary.update(rows=stats.rows, written=stats.written, dropped=stats.dropped, nearest=stats.nearest)
        if prior_out is not None:
            summary["prior"] = {
                "out": str(prior_out), "epsilon": prior_epsilon, "mechanism": "two-sided geometric on counts",
                "guarantee": f"{prior_epsilon}-DP per row (add/remove one row); a person with k rows: k * epsilon"
                if per_person is None else f"{prior_epsilon}-DP per person (add/remove one person's rows, at most "
                f"{per_person.max_rows_per_user} counted); changing a person's rows: 2 * epsilon",
                "seeded": seed is not None,
                **({} if per_person is None else {"accounting": {**acct.describe(), **per_person.as_dict()}}),
            }
        if json:
            echo_json(summary)
            return
        lines = [f"wrote {out}: {cells.n:,} cells of {h * 1000:g} m over {cells.region.name}"]
        if stats is not None:
            extra = {"drop": f", {stats.dropped:,} outside dropped", "nearest": f", {stats.nearest:,} outside moved "
                     "to the nearest cell", "refuse": ""}[unknown.value]
            what = f"wrote {labelled}" if labelled is not None else "read"
            lines.append(f"{what}: {stats.rows:,} rows binned{extra}; {dt:.1f} s")
        if prior_out is not None and noisy is not None:
            lines.append(f"wrote {prior_out}: prior over {cells.n:,} cells, {prior_epsilon:g}-DP per "
                         f"{'row' if per_person is None else 'person'} (noisy total {int(noisy.sum()):,})"
                         f"{' [seeded]' if seed is not None else ''}")
        if per_person is not None:
            lines.append(f"per person ({user_column!r}): {per_person.persons:,} persons, {per_person.rows_counted:,} "
                         f"of {per_person.rows_in:,} rows counted (withheld: {per_person.withheld_cap:,} by "
                         f"--max-rows-per-user {per_person.max_rows_per_user}, {per_person.withheld_budget:,} by the "
                         f"budget, {per_person.persons_over:,} persons over); each person charged "
                         f"{prior_epsilon:g} once, noise at {per_person.count_epsilon:.3g} per count")
        for line in lines:
            console.print(line, markup=False, highlight=False)


def _per_person_prior(src: Path, cells: Any, lat: str, lon: str, epsilon: str, acct: AccountingOptions,
                      prior_out: Path, protected: list[Path], unknown: str, seed: int | None,
                      chunk_rows: int) -> Any:
    """The library's per-person prior (:func:`~metricdp.streaming.accounted_prior.accounted_prior`), CLI errors."""
    from ..location.grid import write_prior
    from ..streaming.accounted_prior import accounted_prior
    from ..tabular.formats import TABLE_FORMATS, format_of

    with acct.open() as book:
        acc = acct.accounting(ledger=book, scope="", mechanism=f"grid prior eps={epsilon} {cells.n} cells")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # --seed is said once, below
            return accounted_prior(src, format_of(src, TABLE_FORMATS), cells, lat, lon, epsilon, acc,
                                   lambda prior: write_prior(prior_out, cells.labels, prior, inputs=protected),
                                   unknown=unknown, rng=seed, chunk_rows=chunk_rows)
