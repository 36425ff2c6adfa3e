"""``metricdp explore POINTS --mechanisms exponential,optimal --epsilons 0.1:10:20 --out explore.html
[--prior FILE] [--json] [--png FILE]``: the trade-off page for choosing epsilon."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ..io import atomic_write, read_points
from ..units import space_unit
from ._common import JsonOption, check_output, console, echo_json, handle_errors, read_label_values

__all__ = ["parse_epsilons", "register"]

_DEFAULT_FAMILIES = "exponential,krr,planar-laplace,optimal"


def parse_epsilons(text: str) -> tuple[float, ...]:
    """``A:B:N`` (N log-spaced epsilons from A to B) or a comma-separated list, as the library's epsilons."""
    from ..explore import epsilon_grid

    form = "expected LOW:HIGH:COUNT (COUNT log-spaced values) or comma-separated numbers"
    parts = text.split(":")
    try:
        if len(parts) == 3:
            lo, hi, count = float(parts[0]), float(parts[1]), int(parts[2])
        elif len(parts) == 1:
            values = tuple(float(x) for x in text.split(",") if x.strip())
        else:
            raise ValueError(text)
    except ValueError:
        raise ValidationError(f"--epsilons {text!r}: {form}") from None
    if len(parts) == 3:
        try:
            return epsilon_grid(lo, hi, count)
        except ValidationError as ex:
            raise ValidationError(f"--epsilons {text!r}: {ex}") from None
    if not values:
        raise ValidationError(f"--epsilons {text!r}: {form}")
    return values


def register(app: typer.Typer) -> None:
    """Add the ``explore`` command to ``app``."""

    @app.command("explore")
    @handle_errors
    def explore(
        points: Annotated[Path, typer.Argument(metavar="POINTS", help="The metric space (as for build).")],
        epsilons: Annotated[str, typer.Option(
            "--epsilons", metavar="LOW:HIGH:COUNT", help="LOW:HIGH:COUNT gives COUNT log-spaced epsilons from LOW "
            "to HIGH (equal ratios between neighbours), e.g. 0.1:10:20; or a comma-separated list. In the space's "
            "unit (per km for lat/lon).")],
        mechanisms: Annotated[str, typer.Option(
            "--mechanisms", help="Comma-separated mechanism families (as build's --mechanism).")] = _DEFAULT_FAMILIES,
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", dir_okay=False, help="The HTML page (self-contained; written atomically).")] = None,
        prior: Annotated[Path | None, typer.Option(
            "--prior", metavar="FILE", help="The adversary's prior (CSV label,prob or .npy); uniform if not given.")
        ] = None,
        quantile: Annotated[float, typer.Option(help="q of the quantile loss and its bound.")] = 0.95,
        png: Annotated[Path | None, typer.Option(
            "--png", metavar="FILE", dir_okay=False, help="Also a static PNG of the curves (needs the plot extra).")
        ] = None,
        json_: JsonOption = False,
    ) -> None:
        """Compare mechanism families across epsilons: losses, adversary error and re-identification."""
        from .._optional import require
        from .._progress import ProgressReporter
        from ..explore import explore as run_explore
        from ..explore_page import render_page, render_png
        from ..settings import settings_for
        from .build import build_mechanism

        if out is None and png is None and not json_:
            raise ValidationError("nothing to write: give --out FILE.html, --png FILE or --json")
        if out is not None and out.suffix.lower() not in (".html", ".htm"):
            raise ValidationError(f"--out {out}: expected an .html file")
        if png is not None:
            require("plot", what="explore --png")
        for path, flag in ((out, "--out"), (png, "--png")):
            if path is not None:
                check_output(path, flag, inputs=(points, prior, out if path is png else png))
        eps = parse_epsilons(epsilons)
        families = [m.strip() for m in mechanisms.split(",") if m.strip()]
        space = read_points(points)
        pi = None
        if prior is not None:
            pi = read_label_values(prior, space.labels, "--prior")
            if not (pi >= 0).all() or float(pi.sum()) <= 0:
                raise ValidationError(f"--prior {prior}: values must be >= 0 and not all 0")
            pi = pi / pi.sum()
        result = run_explore(space, families, eps, prior=pi, quantile=quantile,
                             build=lambda name, sp, e: build_mechanism(sp, name, e),
                             progress=ProgressReporter(f"explore {points.name}", "builds", interval=0.0))
        unit = space_unit(space)
        settings = settings_for(families, eps, unit=unit, prior=prior, input=points)
        if out is not None:
            commands = {f: [shlex.join(["metricdp", "build", str(points), "--mechanism", f, "--epsilon", repr(e),
                                        "--out", f"{f}-eps{e:.4g}.npz"]) for e in eps] for f in families}
            page = render_page(result, commands=commands, settings=settings.text())
            with atomic_write(out, "w", inputs=[points, prior]) as fh:
                fh.write(page)
        if png is not None:
            data = render_png(result)
            with atomic_write(png, "wb", inputs=[points, prior]) as fh:
                fh.write(data)
        if json_:
            echo_json({**result.as_dict(), "settings": settings.as_dict()})
            return
        console.print(settings.text(), end="", markup=False, highlight=False)
        failed = sum(why is not None for f in families for why in result.failures[f])
        if failed:
            console.print(f"not built: {failed} of {len(families) * len(eps)} (family, epsilon) points; the page "
                          "and --json say why", markup=False, highlight=False)
        for path in (out, png):
            if path is not None:
                console.print(f"wrote {path}", markup=False, highlight=False)
