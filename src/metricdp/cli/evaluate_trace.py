"""``metricdp evaluate-trace --true T --released R --user-column U [--key time] [--lat lat --lon lon]
[--epsilon 1/km] [--json]``: attacks on released traces and the utility left in them.

The two files (CSV or Parquet) hold one fix per row; rows are paired by (user, key) and
measured by :func:`metricdp.location.traces.evaluate_traces`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import ValidationError
from ._common import JsonOption, console, echo_json, fmt, handle_errors, progress
from ._epsilon import EpsilonOption, resolve_epsilon

__all__ = ["register"]


def _km(stats: dict[str, float], unit: str = " km") -> str:
    return f"median {fmt(stats['median'], 4)}{unit}, mean {fmt(stats['mean'], 4)}{unit}"


def _table(result: dict[str, Any], true: Path, released: Path) -> Table:
    table = Table(title=f"{released} against {true}", show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    s = result["settings"]
    disp, trips, visits = result["displacement_km"], result["trip_length"], result["visit_counts"]
    attack = result["averaging_attack"]
    rows = [
        ("fixes / persons", f"{result['fixes']} / {result['persons']}"),
        ("displacement per fix", f"{_km(disp)}, 95% {fmt(disp['p95'], 4)} km"),
        ("trip length error", _km(trips["abs_error_km"])),
        ("trip length error (relative)", _km(trips["relative_error"], "")),
        (f"visit counts per {fmt(visits['cell_km'])} km cell",
         f"total variation {fmt(visits['total_variation'], 4)} over {visits['cells']} cells"),
        ("averaging attack: places found", f"{attack['places']} of {attack['persons']} persons "
                                           f"(radius {fmt(s['attack_radius_km'], 4)} km)"),
        ("averaging attack: error per place", f"median {fmt(attack['per_place']['median_km'], 4)} km, "
                                              f"mean {fmt(attack['per_place']['mean_km'], 4)} km"),
        ("averaging attack: error per person", f"median {fmt(attack['per_person']['median_km'], 4)} km, "
                                               f"mean {fmt(attack['per_person']['mean_km'], 4)} km"),
    ]
    adversary = result.get("place_adversary")
    if adversary:
        rows += [
            ("Bayes adversary, one release: error", _km(adversary["expected_error_km"])),
            ("Bayes adversary, one release: re-identification", _km(adversary["reidentification"], "")),
            ("prior only: error", _km(adversary["prior_error_km"])),
            ("prior only: re-identification", _km(adversary["prior_reidentification"], "")),
        ]
    for key, value in rows:
        table.add_row(key, value)
    table.caption = (f"top places: at most {s['max_places']} per person, each with >= {s['min_visits']} fixes "
                     f"within {fmt(s['place_radius_km'])} km")
    if not adversary:
        table.caption += "; give --epsilon for the Bayes adversary and an attack radius matched to the noise"
    return table


def register(app: typer.Typer) -> None:
    """Add the ``evaluate-trace`` command to ``app``."""

    @app.command("evaluate-trace")
    @handle_errors
    def evaluate_trace(
        true: Annotated[Path, typer.Option("--true", metavar="T", dir_okay=False,
                                           help="The true fixes (.csv or .parquet).")],
        released: Annotated[Path, typer.Option("--released", metavar="R", dir_okay=False,
                                               help="The released fixes (.csv or .parquet), same columns.")],
        user_column: Annotated[str, typer.Option("--user-column", metavar="U",
                                                 help="The column naming the person of a fix.")],
        key: Annotated[str, typer.Option("--key", metavar="COL", help="The column pairing a true fix with its "
                                         "release within a person (a time or an id; it orders the trip).")] = "time",
        lat: Annotated[str, typer.Option("--lat", metavar="COL", help="Latitude column (degrees).")] = "lat",
        lon: Annotated[str, typer.Option("--lon", metavar="COL", help="Longitude column (degrees).")] = "lon",
        epsilon: EpsilonOption = None,
        place_radius: Annotated[float, typer.Option("--place-radius", metavar="KM",
                                                    help="Radius of a top place, km.")] = 0.5,
        max_places: Annotated[int, typer.Option("--max-places", min=1, help="Top places per person.")] = 3,
        min_visits: Annotated[int, typer.Option("--min-visits", min=1,
                                                help="Fixes a top place needs within its radius.")] = 5,
        cell: Annotated[float, typer.Option("--cell", metavar="KM", help="Side of the visit-count cells, km.")] = 1.0,
        json_: JsonOption = False,
    ) -> None:
        """Attack released traces (averaging, Bayes adversary per place) and measure their utility.

        The report is for whoever holds the true fixes: --json lists every person (their
        ids, true trip lengths, attack errors), which is no release.
        """
        from ..location.traces import evaluate_traces, pair_traces, read_traces

        for name, value in (("--place-radius", place_radius), ("--cell", cell)):
            if not (math.isfinite(value) and value > 0):
                raise ValidationError(f"{name} must be a positive number of km, got {value!r}")
        eps = resolve_epsilon(epsilon, None, None, "km")
        with progress(f"reading {true} and {released}") as bar:
            sides = [read_traces(p, person=user_column, key=key, lat=lat, lon=lon) for p in (true, released)]
            try:
                paired = pair_traces(*sides[0], *sides[1])
            except ValidationError as ex:
                raise ValidationError(f"--true {true} / --released {released}: {ex}") from None
            bar.update("attacking the releases")
            result = evaluate_traces(paired, epsilon_per_km=eps, place_radius_km=place_radius,
                                     max_places=max_places, min_visits=min_visits, cell_km=cell)
        result["true"], result["released"] = str(true), str(released)
        if json_:
            echo_json(result)
        else:
            console.print(_table(result, true, released))
