"""File in, file out through an engine: parts written by the engine, joined into one output.

Engines write a directory of part files; the CLI promises one file, written atomically.
So the engine writes its parts into a temporary directory beside the output (inside
:func:`metricdp.io.atomic_write`, so an error or a signal removes both), and the parts
are streamed, in partition order, into the output: CSV parts written without a header
after the input's header, Parquet parts re-written batch by batch with the input's
schema (types and metadata restored after the engine's pandas round trip).
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .._optional import import_optional
from ..io import scratch_directory

__all__ = ["join_parts", "scratch_dir"]


def scratch_dir(near: Path) -> Path:
    """A new hidden directory beside ``near`` (same file system: parts are large), which the
    next write to ``near`` removes if this process dies first (:func:`metricdp.io.scratch_directory`)."""
    return scratch_directory(near)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def join_parts(parts: Sequence[Path], fmt: str, fh: IO[bytes], *, header: Sequence[str], schema: Any = None) -> int:
    """Write ``parts`` (in order) to ``fh`` as one CSV or Parquet file; the number of rows."""
    rows = 0
    if fmt == "csv":
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerow(header)
        fh.write(text.getvalue().encode("utf-8"))
        for part in parts:
            with part.open("rb") as src:
                while block := src.read(4 * 2**20):
                    rows += block.count(b"\n")  # the engines quote no line break: one per row
                    fh.write(block)
        return rows
    pa = import_optional("pyarrow", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    with pq.ParquetWriter(fh, schema) as writer:
        for part in parts:
            for batch in pq.ParquetFile(part).iter_batches():
                table = pa.Table.from_batches([batch]).select(schema.names)
                writer.write_table(table.cast(schema))
                rows += table.num_rows
    return rows


def part_files(directory: Path, suffix: str) -> list[Path]:
    """The engine's data files in partition order (names sort by partition number)."""
    return sorted(p for p in directory.rglob(f"*{suffix}") if p.is_file() and not p.name.startswith((".", "_")))
