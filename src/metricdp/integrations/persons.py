"""Rows per person of a file, counted on a cluster: :func:`count_per_person`.

The entry point of the distributed counting pass (:mod:`._persons` holds the pieces' work and the merge);
kept apart from it because it starts the engines, whose modules import :mod:`._run`, which imports
:mod:`._persons`: one direction of imports, no cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ._engines import engine_runner
from ._persons import distributed_persons, pieces_of

__all__ = ["count_per_person"]


def count_per_person(engine: str, input_path: str | Path, user_column: str, *, scheduler: str | None = None,
                     master: str | None = None, piece_bytes: int | None = None,
                     max_record: int | None = None) -> tuple[Any, NDArray[np.int64]]:
    """Rows per person of ``input_path`` counted on ``engine``: (distinct ids as a pyarrow string array, sorted
    bytewise; counts, int64). The file is read with the local engine's reader of its format and cut at row
    boundaries (:mod:`._plan`); every id is refused as the local pass refuses it."""
    from ._plan import DEFAULT_PIECE_BYTES

    pa = import_optional("pyarrow", extra="parquet")
    src = Path(input_path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    plan = pieces_of(src, user_column, piece_bytes or DEFAULT_PIECE_BYTES, max_record)
    found = distributed_persons(engine.capitalize(), engine_runner(engine, scheduler, master), plan, "", user_column,
                                None)
    return found.ids.cast(pa.string()), found.counts
