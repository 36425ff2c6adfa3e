"""The LP benchmark's row: its record (:class:`BenchRow`), its JSON-lines checkpoint
(:func:`append_checkpoint`) and its renderings (the markdown table and report, the plot of
seconds against eps, and :func:`machine_info`, what the numbers were measured on).

:mod:`metricdp.experiments.bench_lp` fills the rows; this module only records and shows them.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .._jsonable import jsonable
from .._resources import usable_cpus
from ..errors import ValidationError

__all__ = [
    "COLUMNS",
    "BenchRow",
    "append_checkpoint",
    "machine_info",
    "markdown_report",
    "markdown_table",
    "plot_seconds",
    "table_rows",
]

#: Table columns (the markdown header) and the BenchRow field behind each.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("n", "n"),
    ("mechanism", "mechanism"),
    ("eps", "epsilon"),
    ("formulation", "formulation"),
    ("status", "status"),
    ("variables", "variables"),
    ("constraints", "constraints"),
    ("nonzeros", "nonzeros"),
    ("rounds", "rounds"),
    ("iterations", "iterations"),
    ("seconds", "seconds"),
    ("peak MiB", "peak_mib"),
    ("worst-case loss", "loss_max"),
    ("95% loss", "loss_quantile"),
    ("objective", "objective"),
    ("gap vs full", "gap"),
    ("certified gap", "certified_gap"),
    ("audited eps", "epsilon_audit"),
    ("vs full", "vs_full"),
)



@dataclass
class BenchRow:
    """One build of the benchmark (``None`` where the build produced no value)."""

    n: int
    mechanism: str
    formulation: str
    epsilon: float = 1.0
    data: str = ""
    status: str = "ok"
    variables: int | None = None
    constraints: int | None = None
    nonzeros: int | None = None
    rounds: int | None = None
    iterations: int | None = None
    seconds: float | None = None
    lp_seconds: float | None = None
    peak_mib: float | None = None
    baseline_mib: float | None = None
    loss_max: float | None = None
    loss_quantile: float | None = None
    objective: float | None = None
    gap: float | None = None
    certified_gap: float | None = None
    epsilon_audit: float | None = None
    vs_full: str = ""
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)



def machine_info() -> dict[str, str]:
    """What the numbers were measured on: CPU, cores, memory, OS and library versions."""
    import scipy

    from .._version import __version__
    from ..lp._solve import highs_version

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            kib = next(int(ln.split()[1]) for ln in fh if ln.startswith("MemTotal"))
            mem = f"{kib / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    try:
        hv = highs_version()  # never the banner: it would go to stdout
    except Exception:  # older highspy: no version(); the package version is enough
        from importlib.metadata import version

        hv = version("highspy")
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(usable_cpus()),
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "highs": hv,
        "metricdp": __version__,
    }


def append_checkpoint(path: str | os.PathLike[str], row: BenchRow) -> None:
    """Append one finished row to a JSON-lines checkpoint and flush it to disk at once."""
    import json

    line = json.dumps(jsonable(row.as_dict()), allow_nan=False)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def plot_seconds(rows: Sequence[BenchRow], path: str | os.PathLike[str]) -> None:
    """Seconds against eps, one line per (mechanism, formulation, n), log-log; PNG, atomic.

    Rows that did not finish are left out (a time-out is drawn at its limit only by the
    table). Drawn on an Agg canvas (:mod:`metricdp._figure`): no display needed, and the
    caller's matplotlib backend is left alone.
    """
    from .._figure import new_figure, save_png
    from .._optional import import_optional

    ticker = import_optional("matplotlib.ticker", "plot")

    series: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for r in rows:
        if r.status == "ok" and r.seconds:
            series.setdefault((r.mechanism, r.formulation, r.n), []).append((r.epsilon, r.seconds))
    if not series:
        raise ValidationError("no finished build to plot")
    mechs = sorted({k[0] for k in series})
    fig = new_figure(4.2 * len(mechs), 3.6, layout=None)
    axes = fig.subplots(1, len(mechs), squeeze=False)
    for ax, mech in zip(axes[0], mechs, strict=True):
        for (m, form, n), pts in sorted(series.items()):
            if m != mech:
                continue
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot(xs, ys, marker="o", linestyle="-" if form != "full" else "--", label=f"n={n} {form}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ticks = sorted({e for (m, _, _), pts in series.items() if m == mech for e, _ in pts})
        ax.set_xticks(ticks, [f"{e:g}" for e in ticks])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(mech)
        ax.set_xlabel("epsilon")
        ax.set_ylabel("seconds (whole build)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def _cell(row: BenchRow, key: str) -> str:
    value = getattr(row, key)
    if value is None:
        return "-"
    if key in ("seconds", "peak_mib"):
        return f"{value:.3g}" if value < 100 else f"{value:.0f}"
    if key in ("loss_max", "loss_quantile"):
        return f"{value:.6g}"
    if key == "objective":
        return f"{value:.10g}"
    if key in ("gap", "certified_gap"):
        return f"{value:+.1e}"
    if key == "epsilon_audit":
        return "inf" if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table_rows(rows: Sequence[BenchRow]) -> list[list[str]]:
    """Every row as the strings of :data:`COLUMNS`."""
    return [[_cell(r, key) for _, key in COLUMNS] for r in rows]


def markdown_table(rows: Sequence[BenchRow]) -> str:
    """The table alone (markdown), followed by one note per row that has a message."""
    text_cols = ("mechanism", "formulation", "status", "vs_full")
    lines = ["| " + " | ".join(h for h, _ in COLUMNS) + " |"]
    lines.append("|" + "|".join("---" if k in text_cols else "---:" for _, k in COLUMNS) + "|")
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(rows)]
    notes = [r for r in rows if r.message]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- n = {r.n}, eps = {r.epsilon:g}, {r.mechanism}, {r.formulation}: {r.status}: {r.message}"
                  for r in notes]
    return "\n".join(lines)


def markdown_report(rows: Sequence[BenchRow], settings: Mapping[str, Any], machine: Mapping[str, str]) -> str:
    """The markdown for ``benchmarks/RESULTS.md``: machine, settings, table, failures."""
    lines = ["# `metricdp bench lp`", ""]
    lines.append("Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items() if v))
    lines.append("")
    lines.append("Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
    lines.append("")
    lines.append(markdown_table(rows))
    lines += [
        "",
        "Columns: LP statistics of the build's largest/last LP as the builder reports them in "
        "`info['lp']`; seconds = wall time of the whole build (LPs, repair and the independent audit); "
        "peak MiB = the build process's peak resident memory (interpreter and libraries included); "
        "losses of the returned mechanism; audited eps = the exact audit the builder re-ran; "
        "iterations = simplex iterations summed over the build's LPs; objective = worst-case loss "
        "(or expected loss under the prior for optimal-expected) of the returned, audited matrix; "
        "gap vs full = its relative difference to the reference (full) build's objective; "
        "certified gap (OPTMech, with --certify) = (objective - L) / L for a lower bound L on the exact LP "
        "optimum at eps proven by weak duality (metricdp.lp.certificate): at most this far from "
        "optimal; '-' where the bound's own LP did not finish in time; "
        "vs full = speed-up of the fast formulation over the full one and that difference.",
        "",
    ]
    return "\n".join(lines)
