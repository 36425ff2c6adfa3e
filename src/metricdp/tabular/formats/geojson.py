"""GeoJSON out: a release of points as a FeatureCollection (RFC 7946), written feature by feature.

One Point feature per released row, coordinates ``[lon, lat]`` in the release's decimals
(or in full where asked), the other written columns as its properties (a text format's
texts, a typed format's values, ``null`` for a missing one). Memory: one chunk of features.
GeoJSON is written, never read as a table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ...errors import ValidationError
from ._base import Chunk, Format, Points, Reader, Released, Writer, WriteSpec, arrow

__all__ = ["FORMAT", "GeoJsonFormat"]


class GeoJsonWriter(Writer):
    """A FeatureCollection, one feature per released row (module docstring)."""

    def __init__(self, fh: IO[bytes], spec: WriteSpec) -> None:
        if spec.geometry is None:
            raise ValidationError(f"{spec.where}: a GeoJSON output holds points; this release has none")
        self._fh, self._first = fh, True
        self._properties = [c for c in spec.plan.written if c not in spec.geometry]
        fh.write(b'{"type":"FeatureCollection","features":[\n')

    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released]) -> int:
        pa, _ = arrow()
        points = next(r for r in released if isinstance(r, Points))
        lat, lon = points.texts()
        columns = []
        for name in self._properties:
            col = chunk.column(name)
            columns.append((col if keep is None else col.filter(pa.array(keep))).to_pylist())
        parts = []
        for r in range(points.rows):
            props = json.dumps(dict(zip(self._properties, (c[r] for c in columns), strict=True)),
                               ensure_ascii=False, allow_nan=False, default=str)
            parts.append(f'{"" if self._first and r == 0 else ","}{{"type":"Feature","geometry":{{"type":"Point",'
                         f'"coordinates":[{lon[r]},{lat[r]}]}},"properties":{props}}}\n')
        self._first = self._first and points.rows == 0
        self._fh.write("".join(parts).encode("utf-8"))
        return points.rows

    def close(self) -> None:
        self._fh.write(b"]}\n")


class GeoJsonFormat(Format):
    """GeoJSON FeatureCollection of points (written only)."""

    name: ClassVar[str] = "geojson"
    suffixes: ClassVar[tuple[str, ...]] = (".geojson",)
    reads: ClassVar[bool] = False

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = 0, max_record: int | None = None,
             kernels: Any = None) -> Reader:
        raise ValidationError(f"{path}: GeoJSON is written by a release of points, not read as a table")

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        return GeoJsonWriter(fh, spec)


FORMAT = GeoJsonFormat()
