"""``metricdp privatize-trace IN -o OUT --user-column U --time-column T --lat LAT --lon LON
--mechanism predictive|per-place|independent --epsilon EPS|--displacement LENGTH
[--budget B --ledger L --over-budget ...] [--engine local|dask|spark]``, or ``--spread-budget B`` (each
person's budget spread over their own fixes, places or trace) with ``--manager fixed|adaptive`` (predictive).

Releases the (lat, lon) of every fix of a trace file (CSV or Parquet; GeoJSON out) in file
order with a state per person (:mod:`metricdp.pipeline.traces`): the predictive mechanism
(a private test against the person's last release, the prediction reported when it passes),
one release per public cell (``--region``, ``--cell``), or independent releases. The rows of
one person must be in time order. With ``--budget`` or ``--ledger`` each person's worst case
is reserved before anything is drawn, and the reservation is what the ledger keeps (the
actual spend is reported beside it); with ``--ledger``, a person's place paid for by an
earlier run is released again as it was, at no cost (without one, per run). ``--engine dask``
or ``--engine spark`` releases each person's fixes in one partition of a cluster
(:mod:`metricdp.integrations._traces`).
"""

from __future__ import annotations

import time
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ..errors import BudgetExceededError, PrivacyLeakWarning, ValidationError
from ._accounting import (
    AccountingOptions,
    BudgetOption,
    LedgerKeyOption,
    LedgerOption,
    OverBudgetOption,
)
from ._common import JsonOption, SeedOption, check_output, console, echo_json, fmt, handle_errors, progress
from ._epsilon import EpsilonOption, resolve_epsilon
from .privatize import (
    ChunkRowsOption,
    DropOption,
    Engine,
    EngineOption,
    KeepOption,
    MasterOption,
    SchedulerOption,
    check_engine,
    leaves_report,
    with_flags,
)

__all__ = ["register"]


class Mechanism(StrEnum):
    predictive = "predictive"
    per_place = "per-place"
    independent = "independent"


#: per-place: the cells' side (km) when --cell is not given
DEFAULT_CELL_KM = 1.0


class Manager(StrEnum):
    fixed = "fixed"
    adaptive = "adaptive"


def _km(text: str | None, flag: str) -> float | None:
    """A length option in km (``500m``, ``2km``, or a plain number of km)."""
    if text is None:
        return None
    from ..units import UnitError, parse_length

    try:
        value, unit = parse_length(text)
    except UnitError as ex:
        raise ValidationError(f"{flag}: {ex}") from None
    return float(value / 1000) if unit == "m" else float(value)


def _eps(text: str | None, flag: str) -> float | None:
    """An eps per km option (``--epsilon``'s forms), its errors naming ``flag``."""
    if text is None:
        return None
    try:
        return resolve_epsilon(text, None, None, "km")
    except ValidationError as ex:
        raise ValidationError(str(ex).replace("--epsilon", flag, 1)) from None


def _mechanism(which: Mechanism, eps: float | None, test_epsilon: str | None, threshold: str | None,
               region: str | None, cell: str | None, manager: Manager | None = None, spread: str | None = None,
               test_share: float | None = None) -> Any:
    """The library's mechanism of the options; an option of another mechanism is refused."""
    from ..pipeline.traces import Independent, PerPlace, Predictive

    adaptive = manager is Manager.adaptive
    given = {"--test-epsilon": test_epsilon, "--threshold": threshold, "--region": region, "--cell": cell,
             "--manager": manager, "--test-share": test_share}
    belongs = {Mechanism.predictive: ("--test-epsilon", "--threshold", "--manager") + (("--test-share",) if adaptive
                                                                                          else ()),
               Mechanism.per_place: ("--region", "--cell"), Mechanism.independent: ()}
    other = [flag for flag, value in given.items() if value is not None and flag not in belongs[which]]
    if other:
        what = "--mechanism predictive --manager adaptive" if other == ["--test-share"] and \
            which is Mechanism.predictive else f"--mechanism {which.value}"
        raise ValidationError(f"{', '.join(other)}: not an option of {what}")
    b = _eps(spread, "--spread-budget")
    if b is not None and eps is not None and not (which is Mechanism.predictive and not adaptive):
        raise ValidationError("--epsilon: not with --spread-budget here: each release's eps is the person's share "
                              "of the budget")
    if b is None and eps is None:
        raise ValidationError("--epsilon is needed: the eps per km of one fresh release (0.5/km, 1/m); or "
                              "--spread-budget B, each person's budget over their own fixes, places or trace")
    if which is Mechanism.independent:
        return Independent(eps, spread=b)
    if which is Mechanism.per_place:
        if region is None:
            raise ValidationError("--mechanism per-place needs --region (the public area tiled into cells, fixed "
                                  "before the data is read)")
        from ..location.grid import CellGrid

        return PerPlace(CellGrid.over(region, _km(cell, "--cell") or DEFAULT_CELL_KM), eps, spread=b)
    km = _km(threshold, "--threshold")
    if adaptive:
        if b is None or eps is not None or test_epsilon is not None:
            raise ValidationError("--manager adaptive chooses every eps from each person's --spread-budget over "
                                  "their fixes: give --spread-budget, and neither --epsilon nor --test-epsilon")
        return Predictive(threshold_km=km, manager="adaptive", spread=b,
                          test_share=0.2 if test_share is None else test_share)
    if eps is None:
        raise ValidationError("--manager fixed needs --epsilon (each fresh release's eps; --spread-budget then caps "
                              "each person's budget), or use --manager adaptive")
    test = _eps(test_epsilon, "--test-epsilon")
    return Predictive(eps, eps / 5 if test is None else test, 2.0 / eps if km is None else km, spread=b)


def _from_displacement(text: str | None, eps: float | None, which: Mechanism, manager: Manager | None,
                       spread: str | None, cell: str | None, budget: float | None) -> float | None:
    """``--epsilon``, or the eps whose mean displacement of a fix is at most ``--displacement``
    (:func:`~metricdp.location.displacement.epsilon_for_displacement`)."""
    if text is None:
        return eps
    if eps is not None:
        raise ValidationError("--displacement: not with --epsilon: it chooses the eps")
    if manager is Manager.adaptive or (spread is not None and which is not Mechanism.predictive):
        raise ValidationError("--displacement: not with --spread-budget here: each release's eps is the person's "
                              "share of the budget")
    from ..location.displacement import epsilon_for_displacement

    d = float(_km(text, "--displacement") or 0.0)
    cell_km = (_km(cell, "--cell") or DEFAULT_CELL_KM) if which is Mechanism.per_place else None
    try:
        return float(epsilon_for_displacement(d, which.value, cell_km=cell_km, budget=budget))
    except ValidationError as ex:
        raise ValidationError(f"--displacement {text}: {ex}") from None


def _stats(a: Any) -> dict[str, float]:
    a = np.asarray(a, dtype=np.float64)
    if not a.size:
        return {"max": 0.0, "median": 0.0, "p90": 0.0, "mean": 0.0}
    return {"max": float(a.max()), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9)),
            "mean": float(a.mean())}


def _shown(s: dict[str, float]) -> str:
    return f"max {fmt(s['max'])}, median {fmt(s['median'])}, p90 {fmt(s['p90'])}, mean {fmt(s['mean'])}"


def _summary(run: Any, out: Path, seconds: float, acct: AccountingOptions, eps: float | None, manager: str | None,
             spread: float | None) -> dict[str, Any]:
    from ..accounting.composition import from_units

    r = run.report
    summary: dict[str, Any] = {
        "output": str(out), "mechanism": run.mechanism, "manager": manager, "epsilon_per_km": eps,
        "displacement_km": None,
        "spread_budget": spread, "rows": run.stats.rows,
        "persons": len(r), "seconds": seconds, "rows_per_second": run.stats.rows / seconds if seconds > 0 else None,
        "fresh_releases": int(r.fresh.sum()), "reuses": int(r.reused.sum()), "tests": int(r.tests.sum()),
        "tests_passed": int(r.passed.sum()), "eps_spent_per_person": _stats(r.eps_spent),
    }
    if run.reserved is not None:
        summary["accounting"] = {
            "budget": float(acct.budget) if acct.budget is not None else (spread if acct.ledger is None else None),
            "ledger": acct.describe()["ledger"],
            "over_budget": acct.policy, "run_id": run.run_id, "withheld_rows": run.withheld, "persons_over": run.over,
            "eps_reserved_per_person": _stats(from_units(run.reserved)),
            "charged": "the reservation (each person's worst case within their budget)",
        }
    return summary


#: what a spread budget is spread over, per mechanism
_OVER = {"independent": "fixes", "per-place": "places", "predictive": "trace"}


def _print(summary: dict[str, Any], user: str) -> None:
    rate = summary["rows_per_second"]
    eps, spread = summary["epsilon_per_km"], summary["spread_budget"]
    manager = (" --manager adaptive" if summary["manager"] == "adaptive" else "") + \
        (f" at eps {fmt(eps)} per km" if eps is not None else "") + \
        (f" (chosen for a mean displacement of at most {fmt(summary['displacement_km'] * 1000)} m)"
         if summary["displacement_km"] is not None else "") + \
        (f", each person's budget {fmt(spread)} per km spread over their {_OVER[summary['mechanism']]}"
         if spread is not None else "")
    lines = [f"wrote {summary['output']}: {summary['rows']:,} fixes of {summary['persons']:,} persons released by "
             f"--mechanism {summary['mechanism']}{manager}"
             f" ({summary['seconds']:.1f} s{'' if rate is None else f', {rate:,.0f} fixes/s'})",
             f"per person ({user!r}): {summary['fresh_releases']:,} fresh releases, {summary['reuses']:,} reuses"
             + (f", {summary['tests']:,} tests ({summary['tests_passed']:,} passed)" if summary["tests"] else ""),
             f"eps spent per person (per km): {_shown(summary['eps_spent_per_person'])}"]
    acc = summary.get("accounting")
    if acc is not None:
        lines.append(f"eps reserved and charged per person (the worst case within the budget): "
                     f"{_shown(acc['eps_reserved_per_person'])}")
        if acc["withheld_rows"]:
            lines.append(f"withheld by the budget: {acc['withheld_rows']:,} rows ({acc['persons_over']:,} persons "
                         "over)")
    if summary["mechanism"] == "per-place":
        from ..location.per_place import DISCLOSURE

        lines.append(f"disclosure: {DISCLOSURE}")
    for line in lines:
        console.print(line, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``privatize-trace`` command to ``app``."""

    @app.command("privatize-trace")
    @handle_errors
    def privatize_trace(
        input_file: Annotated[Path, typer.Argument(metavar="IN", help="CSV or Parquet file of fixes, with a header.")],
        out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="Output file: the input's format, or "
                                          ".geojson.")],
        user_column: Annotated[str, typer.Option("--user-column", metavar="U", help="Who each fix belongs to.")],
        time_column: Annotated[str, typer.Option("--time-column", metavar="T", help="When: numbers or ISO 8601 "
                                                 "times; each person's fixes must come in time order.")],
        lat: Annotated[str, typer.Option("--lat", help="Latitude column (degrees).")],
        lon: Annotated[str, typer.Option("--lon", help="Longitude column (degrees).")],
        epsilon: EpsilonOption = None,
        displacement: Annotated[str | None, typer.Option("--displacement", metavar="LENGTH", help="Instead of "
                                                         "--epsilon: the mean displacement of a fix accepted "
                                                         "(500m, 2km); the eps is chosen from it (independent and "
                                                         "predictive's fresh releases: 2 / eps exactly; per-place: "
                                                         "2 / eps + half the cell's diagonal, a bound).")] = None,
        mechanism: Annotated[Mechanism, typer.Option("--mechanism", case_sensitive=False, help="predictive: a "
                                                     "private test reuses the last release when the fix is near "
                                                     "it; per-place: one release per public cell (with --ledger, "
                                                     "reused across runs for free); independent: a "
                                                     "fresh release per fix.")] = Mechanism.predictive,
        manager: Annotated[Manager | None, typer.Option("--manager", case_sensitive=False, help="predictive: "
                                                        "fixed (default): tests at --test-epsilon, fresh "
                                                        "releases at --epsilon until the person's budget is "
                                                        "spent; adaptive: a target spend of --spread-budget / n "
                                                        "per fix for a person of n fixes, eps of the fresh "
                                                        "releases adapted to the pass rate.")] = None,
        spread_budget: Annotated[str | None, typer.Option("--spread-budget", metavar="B", help="Each person's "
                                                          "eps per km over their whole release: independent: B / n "
                                                          "per fix (n: their fixes); per-place: B / k per place "
                                                          "(k: their cells); predictive: the manager's budget B "
                                                          "(adaptive: over n fixes). Shares are rounded down onto "
                                                          "the accounting grid (1e-12).")] = None,
        test_share: Annotated[float | None, typer.Option("--test-share", min=0.0, max=1.0, help="predictive "
                                                         "--manager adaptive: the tests' share of the spend per "
                                                         "fix (default 0.2).")] = None,
        test_epsilon: Annotated[str | None, typer.Option("--test-epsilon", metavar="EPS", help="predictive: eps "
                                                         "of each test (default: --epsilon / 5).")] = None,
        threshold: Annotated[str | None, typer.Option("--threshold", metavar="LENGTH", help="predictive: a fix "
                                                      "within this of the last release may reuse it (default: "
                                                      "2 / eps, the mean displacement).")] = None,
        region: Annotated[str | None, typer.Option("--region", help="per-place: the public area tiled into cells "
                                                   "(LAT0,LON0,LAT1,LON1, a named region, or a GeoJSON file).")]
        = None,
        cell: Annotated[str | None, typer.Option("--cell", metavar="LENGTH", help="per-place: the cells' side "
                                                 "(default 1km).")] = None,
        budget: BudgetOption = None,
        ledger: LedgerOption = None,
        ledger_key: LedgerKeyOption = None,
        over_budget: OverBudgetOption = None,
        drop: DropOption = None,
        keep: KeepOption = None,
        digits: Annotated[int, typer.Option("--digits", min=0, max=15, help="Decimals of released coordinates "
                                            "in a text format.")] = 6,
        engine: EngineOption = Engine.local,
        scheduler: SchedulerOption = None,
        master: MasterOption = None,
        chunk_rows: ChunkRowsOption = None,
        report: Annotated[Path | None, typer.Option("--report", dir_okay=False, help="Write the per-person report "
                                                    "(CSV: person, eps spent, eps reserved, fresh releases, "
                                                    "reuses, tests, passed); it names the persons.")] = None,
        seed: SeedOption = None,
        json: JsonOption = False,
    ) -> None:
        """Release the fixes of traces per person: predictive, one release per place, or independent.

        Each person's fixes are released in file order (they must be in time order) with a
        state per person; other columns are written with their TRUE values (named on stderr)
        unless --drop removes them. With --budget or --ledger, each person's worst case is
        reserved before anything is drawn and charged; the actual spend is reported beside it.
        With --spread-budget B, each person's release spends at most B, spread over their own
        fixes, places or trace (--manager adaptive: a target of B / n per fix).
        --engine dask or spark brings each person's fixes into one partition and releases
        them there (the output's rows then come grouped by partition, each person's in file
        order).
        """
        acct = AccountingOptions(user_column, budget, ledger, ledger_key, None, over_budget).for_unit("km")
        acct.check()
        check_engine(engine, scheduler, master, chunk_rows)  # before anything is read or started
        eps = _from_displacement(displacement, resolve_epsilon(epsilon, None, None, "km"), mechanism, manager,
                                 spread_budget, cell, acct.budget)
        mech = _mechanism(mechanism, eps, test_epsilon, threshold, region, cell, manager, spread_budget, test_share)
        check_output(out, inputs=(input_file, report, *acct.files()))
        if report is not None:
            check_output(report, "--report", inputs=(input_file, out, *acct.files()))
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        from ..streaming.traces import release_traces_file

        t0 = time.perf_counter()
        try:
            with (acct.open() as book, progress(f"releasing the traces of {input_file}", unit="rows") as bar,
                  warnings.catch_warnings()):
                warnings.simplefilter("ignore", PrivacyLeakWarning)  # said once below, as a warning line
                try:
                    run = release_traces_file(
                        input_file, out, user=user_column, time=time_column, lat=lat, lon=lon, mechanism=mech,
                        keep=tuple(keep or ()), drop=tuple(drop or ()), ledger=book, policy=acct.policy,
                        budget=None if book is not None else acct.budget, rng=seed, digits=digits,
                        chunk_rows=chunk_rows, inputs=tuple(acct.files()), engine=engine.value,
                        scheduler=scheduler, master=master, progress=bar)
                except ValidationError as ex:  # the library names no flag; say which one
                    msg = with_flags(str(ex))
                    raise ValidationError(msg if msg.startswith(str(input_file)) else f"{input_file}: {msg}") \
                        from None
        except BudgetExceededError as ex:  # this command has no --max-rows-per-user
            ex.args = (str(ex).replace(", --max-rows-per-user K caps every person", ""), *ex.args[1:])
            raise
        seconds = time.perf_counter() - t0
        leaves_report(run.stats.columns, seed, engine)
        summary = _summary(run, out, seconds, acct, eps,
                           getattr(mech, "kind_of_manager", None), mech.spread)
        summary["engine"] = engine.value
        summary["displacement_km"] = _km(displacement, "--displacement")
        if report is not None:
            run.write_report(report, inputs=(input_file, out, *acct.files()))
            summary["report"] = str(report)
        if json:
            echo_json(summary)
        else:
            _print(summary, user_column)
