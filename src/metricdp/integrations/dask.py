"""Privatize a column of a Dask DataFrame (``pip install 'metricdp[dask]'``).

The mechanism is one node of the task graph (``dask.delayed(mechanism)``): it is
serialised once and sent to each worker once, not once per partition. Each partition
draws from its own stream (see :func:`metricdp.integrations.partition_rng`).

Every computation of the returned DataFrame draws NEW releases: computing it twice is
two releases of the same data (twice the privacy loss). Persist it or write it once.

Example (a local cluster)::

    import dask.dataframe as dd
    from metricdp.integrations.dask import privatize_dask

    df = dd.read_parquet("cities.parquet")
    privatize_dask(df, "city", mechanism).to_parquet("released/")
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from .._optional import import_optional
from ..errors import ValidationError
from ._common import Shipped, check_seed, partition_rng, release_column

__all__ = ["privatize_dask", "privatize_file_dask"]


def _release_partition(part: Any, mechanism: Any, column: str, seed: int | None, partition_info: Any = None) -> Any:
    number = 0 if partition_info is None else int(partition_info["number"])
    if partition_info is None and seed is not None:
        raise ValidationError("dask gave no partition number: cannot spawn a per-partition seed")
    rng = partition_rng(seed, number)
    released = release_column(part[column], mechanism.mechanism, rng, f"partition {number}, column {column!r}")
    out = part.copy(deep=False)
    out[column] = released
    return out


def privatize_dask(df: Any, column: str, mechanism: Any, *, seed: int | None = None) -> Any:
    """A lazy Dask DataFrame with ``column`` replaced by releases of ``mechanism``.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
    column : str
        A column of labels of ``mechanism``'s space (a value that is not one makes the
        computation fail with :class:`~metricdp.errors.ValidationError`, naming the
        partition and its row numbers).
    mechanism : Mechanism
    seed : int, optional
        Experiments only: partition k uses ``SeedSequence(seed).spawn(...)[k]``
        (:class:`~metricdp.errors.PrivacyLeakWarning`). Default: the OS secure source
        in every partition.
    """
    dask = import_optional("dask", extra="dask")
    if column not in df.columns:
        raise ValidationError(f"no column {column!r}; available: {', '.join(repr(str(c)) for c in df.columns)}")
    seed = check_seed(seed)
    shipped = dask.delayed(Shipped(mechanism), pure=True)  # one graph node, sent once per worker
    return df.map_partitions(_release_partition, shipped, column, seed, meta=df._meta)


def privatize_file_dask(
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    scheduler: str | None = None,
    seed: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
) -> int:
    """The ``--engine dask`` file path: read, release on a cluster, write ``out`` atomically.

    ``scheduler`` is the address of an existing Dask scheduler (``tcp://host:8786``);
    without it a local cluster (one single-threaded worker process per core) is started
    and closed. CSV is read as strings (pandas' parser: a line break inside a quoted
    field is not supported by Dask's block splitting) and written with minimal quoting:
    values of the other columns are kept, their quoting is not (the local engine keeps
    bytes). Returns the number of rows written.
    """
    from ..io import atomic_write
    from ..streaming.files import check_header, file_format
    from ._files import join_parts, part_files, remove, scratch_dir

    dask = import_optional("dask", extra="dask")
    dd = import_optional("dask.dataframe", extra="dask")
    distributed = import_optional("distributed", extra="dask")
    src, target = Path(input_path), Path(out)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    fmt = file_format(src)
    names, schema = _header(src, fmt)
    check_header(names, column, str(src))
    with contextlib.ExitStack() as stack:
        if scheduler:
            client = stack.enter_context(distributed.Client(scheduler))
        else:
            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=os.cpu_count() or 1, threads_per_worker=1, dashboard_address=":0", processes=True
                )
            )
            client = stack.enter_context(distributed.Client(cluster))
        del client  # the default client of the computations below
        if fmt == "csv":
            df = dd.read_csv(str(src), dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8")
        else:
            df = dd.read_parquet(str(src))
        with atomic_write(target, "wb", inputs=[src, *inputs]) as fh:
            tmp = scratch_dir(target)
            try:
                result = privatize_dask(df, column, mechanism, seed=seed)
                if fmt == "csv":  # pyarrow's CSV writer, several times faster than pandas' to_csv
                    parts = result.to_delayed()
                    dask.compute(*(_write_csv_part(p, str(tmp / f"{_part_name(i)}.csv")) for i, p in enumerate(parts)))
                else:
                    result.to_parquet(str(tmp), write_index=False, name_function=lambda i: f"{_part_name(i)}.parquet")
                return join_parts(part_files(tmp, "." + fmt), fmt, fh, header=names, schema=schema)
            finally:
                remove(tmp)
    raise AssertionError("unreachable")  # pragma: no cover


def _part_name(i: int) -> str:
    return f"{i:08d}"


def _write_csv_part_now(part: Any, path: str) -> int:
    """One partition as CSV without a header (minimal quoting, ``\n``); its row count."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.Table.from_pandas(part, preserve_index=False)
    pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return len(part)


def _write_csv_part(part: Any, path: str) -> Any:
    dask = import_optional("dask", extra="dask")
    return dask.delayed(_write_csv_part_now, pure=False)(part, path)


def _header(src: Path, fmt: str) -> tuple[list[str], Any]:
    """Column names (and the Arrow schema of a Parquet file)."""
    if fmt == "parquet":
        pq = import_optional("pyarrow.parquet", extra="parquet")
        try:
            schema = pq.read_schema(src)
        except Exception as ex:  # pyarrow raises several unrelated types for bad files
            raise ValidationError(f"{src}: not a readable Parquet file ({ex})") from None
        return list(schema.names), schema
    with src.open(newline="", encoding="utf-8-sig", errors="strict") as fh:
        try:
            header = next(csv.reader(fh), None)
        except UnicodeDecodeError as ex:
            raise ValidationError(f"{src}: not valid UTF-8 in the header (byte {ex.start})") from None
    if header is None:
        raise ValidationError(f"{src}: empty file (no header row)")
    return header, None
