"""``metricdp evaluate MECH.npz [--delta 0.001] [--quantile 0.95] [--json]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .._validation import check_delta, check_quantile
from ..evaluation import ESTIMATE_NOTE, evaluate_mechanism
from ..io import read_points
from ..mechanisms.file import load_mechanism
from ._common import JsonOption, console, echo_json, fmt, handle_errors, progress

__all__ = ["register"]

def _table(result: dict[str, Any], path: Path) -> Table:
    q, delta = result["quantile"], result["delta"]

    def pm(key: str) -> str:
        half = result.get(f"{key}_half_width")
        return fmt(result[key]) + (f" ± {fmt(half)}" if half is not None else "")

    table = Table(title=f"{path}", show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = [
        ("mechanism", result["mechanism"]),
        ("points", f"{result['n']} ({result['metric']})"),
        ("epsilon (guarantee)", fmt(result["epsilon"], 12)),
    ]
    if result["exact"]:
        rows += [
            ("epsilon (exact audit)", fmt(result["epsilon_audit"], 12)),
            (f"epsilon tight (delta={delta:g})", fmt(result["epsilon_tight"], 12)),
        ]
    else:
        rows.append(("epsilon audit", "estimate: not audited"))
    rows += [
        ("worst-case loss", pm("loss_max")),
        (f"{q:g}-quantile loss", pm("loss_quantile")),
        ("expected loss (uniform prior)", pm("loss_expected")),
        ("uniform baseline: worst case", fmt(result["loss_uniform_max"])),
        (f"uniform baseline: {q:g}-quantile", fmt(result["loss_uniform"])),
    ]
    if "lower_bound" in result:
        rows += [
            ("lower bound: worst case", fmt(result["lower_bound"])),
            (f"lower bound: {q:g}-quantile", fmt(result["lower_bound_quantile"])),
        ]
    for key, value in result["params"].items():
        if not isinstance(value, list | dict):
            rows.append((f"param {key}", fmt(value)))
    for key, value in (result.get("lp") or {}).items():
        rows.append((f"lp {key}", fmt(value)))
    for key, value in rows:
        table.add_row(key, value)
    if not result["exact"]:
        table.caption = ESTIMATE_NOTE + "; ± are half-widths of the per-row confidence intervals"
    return table


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""

    @app.command("evaluate")
    @handle_errors
    def evaluate(
        mechanism_file: Annotated[Path, typer.Argument(metavar="MECH.npz", help="A mechanism file.")],
        delta: Annotated[
            float, typer.Option(help="delta of epsilon_tight (the (eps, delta)-mDP level).")
        ] = 1e-3,
        quantile: Annotated[float, typer.Option(help="q of the quantile losses, in (0, 1].")] = 0.95,
        space_file: Annotated[
            Path | None,
            typer.Option("--space", metavar="POINTS", help="A trusted POINTS file: audit the matrix against its "
                         "distances instead of the file's own (use it for a mechanism file from someone else)."),
        ] = None,
        json_: JsonOption = False,
    ) -> None:
        """Verify a mechanism file and report its privacy (epsilon) and utility (losses).

        The file is verified from first principles as every command does (distances against
        its points, the audit at its claimed epsilon, an estimated family's epsilon from its
        parameters); a file whose claim fails is refused with exit status 1.
        """
        check_delta(delta, "--delta")
        check_quantile(quantile, "--quantile")
        trusted = None if space_file is None else read_points(space_file)
        with progress(f"loading {mechanism_file}") as bar:
            mech = load_mechanism(mechanism_file, space=trusted)
            result = evaluate_mechanism(mech, delta, quantile, progress=lambda _d, _t, text: bar.update(text))
        if json_:
            echo_json(result)
        else:
            console.print(_table(result, mechanism_file))
