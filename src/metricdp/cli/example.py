"""``metricdp example NAME --out FILE``: write a built-in POINTS file or the example check-ins.

``checkins`` is a small synthetic check-in file over the built-in capitals (300 rows:
``user,time,city,lat,lon``; ``city`` is a label of ``europe-capitals`` and ``lat,lon`` a
GPS fix within a few km of it), the input of the README's ``privatize``, ``estimate``
and ``privatize-points`` examples. It was drawn once with a fixed seed and is shipped
as a file, so every installation writes the same bytes.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ..io import atomic_write
from ._common import check_output, console, handle_errors

__all__ = ["EXAMPLES", "example_text", "register"]

#: Built-in POINTS files: name -> (file in ``metricdp/data/examples``, description).
EXAMPLES: dict[str, tuple[str, str]] = {
    "europe-capitals": (
        "europe-capitals.csv",
        "43 European capitals, label,lat,lon in degrees (haversine, km)",
    ),
    "grid-10x10": (
        "grid-10x10.csv",
        "a 10 x 10 grid of 150 m cells, label,x,y in metres (euclidean)",
    ),
    "checkins": (
        "checkins.csv",
        "300 synthetic check-ins user,time,city,lat,lon over europe-capitals (not a POINTS file)",
    ),
    "capitals-prior": (
        "europe-capitals-prior.csv",
        "a prior over europe-capitals, label,prior: the checkins' shares, add-one smoothed (not a POINTS file)",
    ),
}


def example_text(name: str) -> str:
    """The content of the built-in POINTS file ``name``."""
    if name not in EXAMPLES:
        raise ValidationError(f"no example named {name!r}; available: {', '.join(EXAMPLES)}")
    folder = resources.files("metricdp").joinpath("data").joinpath("examples")
    return folder.joinpath(EXAMPLES[name][0]).read_text(encoding="utf-8")


def register(app: typer.Typer) -> None:
    """Add the ``example`` command to ``app``."""

    @app.command("example")
    @handle_errors
    def example(
        name: Annotated[
            str | None, typer.Argument(help="Example name (see --list).", show_default=False)
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="Output POINTS file.", dir_okay=False)
        ] = None,
        list_: Annotated[bool, typer.Option("--list", help="List the built-in examples.")] = False,
    ) -> None:
        """Write a built-in POINTS file (a small metric space to try the other commands on), or example check-ins."""
        if list_:
            for key, (_, description) in EXAMPLES.items():
                console.print(f"{key:<18} {description}", markup=False, highlight=False)
            return
        if name is None:
            raise ValidationError("give an example NAME (see metricdp example --list)")
        if out is None:
            raise ValidationError("give --out FILE to write the example to")
        text = example_text(name)
        check_output(out)
        with atomic_write(out, "w") as fh:
            fh.write(text)
        what = {"checkins": "check-ins", "capitals-prior": "prior probabilities"}.get(name, "points")
        console.print(f"wrote {out} ({text.count(chr(10)) - 1} {what})", markup=False, highlight=False)
