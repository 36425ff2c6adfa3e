"""``metricdp evaluate MECH.npz [--delta 0.001] [--quantile 0.95] [--json]``."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from .._validation import check_delta, check_quantile
from ..errors import PrivacyViolationError
from ..io import load_mechanism
from ..loss import quantile_rank
from ..mechanisms.base import AUDIT_RTOL, Mechanism
from ._common import JsonOption, console, echo_json, fmt, handle_errors, progress

__all__ = ["evaluate_mechanism", "register"]

_ESTIMATE_NOTE = "not audited: the matrix is a Monte-Carlo estimate; epsilon is the proven guarantee"


def _bounds() -> Any | None:
    """:mod:`metricdp.bounds` when this installation has it, else None."""
    try:
        return importlib.import_module("metricdp.bounds")
    except ModuleNotFoundError as ex:
        if ex.name != "metricdp.bounds":
            raise
        return None


def evaluate_mechanism(
    mechanism: Mechanism, delta: float = 1e-3, quantile: float = 0.95, update: Any = None
) -> dict[str, Any]:
    """Privacy and utility of a mechanism, as the JSON object ``metricdp evaluate`` prints.

    Keys: ``mechanism, n, metric, exact, epsilon, epsilon_audit, epsilon_tight, delta,
    quantile, loss_max, loss_quantile, loss_expected`` (uniform prior),
    ``loss_uniform`` (the q-quantile loss of releasing a uniformly random element) and
    ``loss_uniform_max``; ``lower_bound`` and ``lower_bound_quantile`` (Imola et al.,
    Theorem 3) when :mod:`metricdp.bounds` exists; ``params``; ``lp`` when an LP was
    solved.

    For an estimated mechanism (``exact`` false) the matrix is a Monte-Carlo estimate:
    ``epsilon_audit`` and ``epsilon_tight`` are ``None`` (auditing an estimate says
    nothing about the mechanism), ``epsilon`` is the proven guarantee, and the losses
    come with half-widths. With per-row half-widths h_u,
    ``|max_u L^_u - max_u L_u| <= max_u h_u`` and every order statistic moves by at
    most ``max_u h_u`` too, so ``loss_max_half_width = loss_quantile_half_width =
    max_u h_u``; the expected loss gets ``mean_u h_u``. These hold when every row's
    interval holds (per-row confidence, see ``estimate.confidence``).
    """
    delta = check_delta(delta)
    q = check_quantile(quantile)
    step = update or (lambda _text: None)
    n = mechanism.n
    uniform = np.sort(mechanism.uniform_losses())
    out: dict[str, Any] = {
        "mechanism": mechanism.name,
        "n": n,
        "metric": mechanism.space.metric,
        "exact": mechanism.exact,
        "epsilon": mechanism.epsilon,
        "epsilon_audit": None,
        "epsilon_tight": None,
        "delta": delta,
        "quantile": q,
        "loss_max": mechanism.worst_case_loss(),
        "loss_quantile": mechanism.quantile_loss(q),
        "loss_expected": mechanism.expected_loss(),
        "loss_uniform": float(uniform[quantile_rank(n, q) - 1]),
        "loss_uniform_max": float(uniform[-1]),
    }
    if mechanism.exact:
        step(f"auditing {n} x {n} matrix")
        out["epsilon_audit"] = mechanism.audit().epsilon
        step(f"epsilon_tight at delta={delta:g}")
        out["epsilon_tight"] = mechanism.epsilon_tight(delta)
    else:
        estimate = dict(mechanism.info.get("estimate") or {})
        half = np.asarray(estimate.get("loss_half_width") or [], dtype=np.float64)
        out["audit"] = _ESTIMATE_NOTE
        if half.shape == (n,):
            out["loss_max_half_width"] = float(half.max())
            out["loss_quantile_half_width"] = float(half.max())
            out["loss_expected_half_width"] = float(half.mean())
        out["estimate"] = {k: v for k, v in estimate.items() if not isinstance(v, list | tuple)}
    bounds = _bounds()
    if bounds is not None:
        step("lower bounds")
        space, eps = mechanism.space, mechanism.epsilon
        out["lower_bound"] = float(bounds.lower_bound(space, eps).value)
        out["lower_bound_quantile"] = float(bounds.lower_bound_quantile(space, eps, q).value)
    out["params"] = dict(mechanism.params)
    if "lp" in mechanism.info:
        out["lp"] = dict(mechanism.info["lp"])
    return out


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
        table.caption = _ESTIMATE_NOTE + "; ± are half-widths of the per-row confidence intervals"
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
        json_: JsonOption = False,
    ) -> None:
        """Audit a mechanism file and report its privacy (epsilon) and utility (losses)."""
        check_delta(delta, "--delta")
        check_quantile(quantile, "--quantile")
        with progress(f"loading {mechanism_file}") as bar:
            # evaluate audits the matrix itself and reports a failed claim below
            mech = load_mechanism(mechanism_file, verify=False)
            result = evaluate_mechanism(mech, delta, quantile, update=bar.update)
        if json_:
            echo_json(result)
        else:
            console.print(_table(result, mechanism_file))
        audited = result.get("epsilon_audit")
        if audited is not None and audited > mech.epsilon * (1 + AUDIT_RTOL):
            raise PrivacyViolationError(
                f"{mechanism_file}: claims epsilon={mech.epsilon!r} but its matrix is only {audited!r}-mDP"
            )
