"""``metricdp evaluate MECH.npz [--delta 0.001] [--quantile 0.95] [--json]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .._validation import check_delta, check_quantile
from ..adversary import adversary_report
from ..evaluation import ESTIMATE_NOTE, evaluate_mechanism
from ..io import read_points
from ..mechanisms.file import load_mechanism
from ..settings import settings_for
from ..units import describe_epsilon, with_unit
from ._common import JsonOption, console, echo_json, fmt, handle_errors, progress, read_label_values

__all__ = ["register"]

def _table(result: dict[str, Any], path: Path) -> Table:
    q, delta = result["quantile"], result["delta"]

    unit = result.get("unit", "")

    def pm(key: str) -> str:
        half = result.get(f"{key}_half_width")
        return with_unit(fmt(result[key]) + (f" ± {fmt(half)}" if half is not None else ""), unit)

    table = Table(title=f"{path}", show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = [
        ("mechanism", result["mechanism"]),
        ("points", f"{result['n']} ({result['metric']})"),
        *([("covariance", str(result["covariance"]))] if "covariance" in result else []),
        *([("policy graph", f"{result['policy_graph']['components']} components, cross-component pairs "
                            "unprotected")] if "policy_graph" in result else []),
        *([("outputs", f"{result['outputs']} (a separate output set)")] if "outputs" in result else []),
        ("epsilon (guarantee)", fmt(result["epsilon"], 12)),
        *([("epsilon (l, r)", describe_epsilon(result["epsilon"], unit))] if unit else []),
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
        ("uniform baseline: worst case", with_unit(fmt(result["loss_uniform_max"]), unit)),
        (f"uniform baseline: {q:g}-quantile", with_unit(fmt(result["loss_uniform"]), unit)),
    ]
    if "lower_bound" in result:
        rows += [
            ("lower bound: worst case", with_unit(fmt(result["lower_bound"]), unit)),
            (f"lower bound: {q:g}-quantile", with_unit(fmt(result["lower_bound_quantile"]), unit)),
        ]
    elif "lower_bound_note" in result:
        rows.append(("lower bound", result["lower_bound_note"]))
    adversary = result.get("adversary")
    if adversary:
        rows += [
            ("adversary: expected error (prior)", with_unit(fmt(adversary["adversary_expected_error"]), unit)),
            ("adversary: re-identification", fmt(adversary["adversary_reidentification"])),
            ("prior only: expected error", with_unit(fmt(adversary["prior_only_error"]), unit)),
            ("prior only: re-identification", fmt(adversary["prior_only_reidentification"])),
        ]
    for key, value in result["params"].items():
        if not isinstance(value, list | dict):
            rows.append((f"param {key}", fmt(value)))
    for key, value in (result.get("lp") or {}).items():
        rows.append((f"lp {key}", fmt(value)))
    for key, value in rows:
        table.add_row(key, value)
    notes = []
    if not result["exact"]:
        notes.append(ESTIMATE_NOTE + "; ± are half-widths of the per-row confidence intervals")
    if result.get("lower_bound") == 0.0 or result.get("lower_bound_quantile") == 0.0:
        notes.append("a lower bound of 0 says nothing: no packing of this space forces a loss at this epsilon "
                     "(the points are too close for it), which is not a claim that loss 0 is reachable")
    if notes:
        table.caption = "; ".join(notes)
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
        prior_file: Annotated[
            Path | None,
            typer.Option("--prior", metavar="FILE", help="A prior over the inputs (CSV label,prob or .npy): report "
                         "the Bayes-optimal adversary's expected error and re-identification probability."),
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
            if prior_file is not None:
                bar.update("the Bayes-optimal adversary")
                pi = read_label_values(prior_file, mech.labels, "--prior")
                result["adversary"] = adversary_report(mech, pi / pi.sum())
        settings = settings_for(mech.name, mech.epsilon, unit=result["unit"], prior=prior_file, input=mechanism_file)
        if json_:
            echo_json({**result, "settings": settings.as_dict()})
        else:
            console.print(_table(result, mechanism_file))
            console.print(settings.text(), end="", markup=False, highlight=False)
