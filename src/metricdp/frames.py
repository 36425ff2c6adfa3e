"""DataFrames in, DataFrames out: pandas and Polars, Series, and a scikit-learn transformer.

* :func:`privatize_frame` -- release one column of a pandas or Polars DataFrame through a
  :class:`~metricdp.mechanisms.base.Mechanism`; the index (pandas), the row order, the
  other columns and their dtypes are kept, and the released column keeps its dtype
  wherever the output labels fit it (integers stay integers, a categorical column becomes
  a categorical of the output labels, text stays text). It returns the frame and the
  :class:`~metricdp.tabular.columns.ColumnPlan` of the release pipeline: which columns
  leave with their TRUE values (``unreleased``), which of those nobody named
  (``unacknowledged``), and which were dropped, by the same rules as the file commands
  (``keep`` / ``drop``: an unknown name or a released column in either is refused). A
  pandas index is part of what leaves: each level (named, or ``index`` / ``level_k`` as
  :meth:`pandas.DataFrame.reset_index` names it, ``"id (index)"`` when a column has its
  name; a default ``RangeIndex`` holds positions only and is not) is planned, checked and
  can be kept or dropped like a column, and the released column may not live in the index.
  The columns nobody named are announced with a :class:`~metricdp.errors.UnnamedColumnsWarning`,
  and a column that holds the released values under another name (by name or content:
  :mod:`metricdp.tabular.leaks`) is refused unless ``keep`` names it. A Polars
  ``LazyFrame`` is refused (collect it first: what leaves is decided on the rows).
* :func:`privatize_points_frame` -- the same for a ``(lat, lon)`` pair of columns released
  together by a release of points (as :func:`metricdp.streaming.points.privatize_points_file`
  takes it); the released coordinates are float64 columns.
* :func:`privatize_series` -- ``Mechanism.privatize`` for a Series: same index, same name.
* :class:`PrivatizeTransformer` -- the same as a scikit-learn transformer (``fit`` /
  ``transform`` / ``get_params`` / ``set_output``), duck-typed, so that scikit-learn is not
  needed to import it; ``fit`` reads nothing from the data.

The values go through the release pipeline's kinds, as a column of a file does
(:mod:`metricdp.pipeline.frames`): the released column becomes an Arrow record batch, read by
the one rule of :class:`~metricdp.pipeline.labels.Labels` (a value is a label when its text,
Arrow's cast of a typed column, equals one: ``1.0`` in a float column reads ``"1"``) or of
:class:`~metricdp.pipeline.numbers.Numbers` (a :class:`~metricdp.mechanisms.numeric.NumberMechanism`:
numbers on its grid). Values the kind refuses, missing values included, stop the release
with one error naming the column, the count, the values and the first rows by their index
label (Polars: their row number). Randomness: ``rng=None`` is
the OS's secure source; anything else warns (:class:`~metricdp.errors.PrivacyLeakWarning`)
once per call. pandas and Polars are optional (extras ``pandas`` and ``polars``); neither
is imported unless a frame of that library is passed.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._optional import import_optional
from ._random import check_release_rng
from .errors import UnnamedColumnsWarning, ValidationError
from .pipeline.frames import column_kind, plain_column, release_batch
from .tabular.columns import ColumnPlan, plan_columns
from .tabular.formats import arrow
from .tabular.leaks import check_names, check_rows, compared_rows

if TYPE_CHECKING:
    from .mechanisms.base import Mechanism
    from .mechanisms.numeric import NumberMechanism
    from .pipeline.kind import Kind
    from .pipeline.points import Release

__all__ = ["PrivatizeTransformer", "privatize_frame", "privatize_points_frame", "privatize_series"]


def _library(obj: object) -> str:
    root = type(obj).__module__.split(".")[0]
    return root if root in ("pandas", "polars") else ""


def _row(label: object) -> str:
    """A row's index label as an error names it: ``'r20134'``, ``7`` (numpy scalars as Python values)."""
    return repr(label.item() if isinstance(label, np.generic) else label)


def _check_leaks(df: Any, lib: str, plan: ColumnPlan, levels: list[str], kind: Kind) -> None:
    """:func:`metricdp.tabular.leaks.check_rows` with the kind's rule over the blocks of a frame's rows.

    pandas rows are named by their index label, Polars rows by their number; the index
    levels are compared as columns.

    Only the compared rows of each block are read (:func:`~metricdp.tabular.leaks.compared_rows`,
    the rule of every reading of a table), so the check costs :data:`~metricdp.tabular.leaks.SAMPLE`
    rows per block, not a copy of the frame.
    """
    if not plan.unacknowledged:
        return
    flat, blocks = compared_rows(len(df), 0, len(df))
    if lib == "pandas":
        part = df.iloc[flat]
        truths = [part[c].to_numpy(dtype=object) for c in kind.columns]
        others = {c: (part.index.get_level_values(levels.index(c)) if c in levels else part[c]).to_numpy(dtype=object)
                  for c in plan.unacknowledged}
        names = [_row(label) for label in part.index]
    else:
        part = df[flat]
        truths = [np.asarray(part[c].to_list(), dtype=object) for c in kind.columns]
        others = {c: np.asarray(part[c].to_list(), dtype=object) for c in plan.unacknowledged}
        names = [str(i) for i in flat]
    rule = kind.rule()
    at = 0
    for _, block in itertools.groupby(blocks):  # a block's compared rows are consecutive
        k = slice(at, at + len(list(block)))
        check_rows(rule, list(zip(*(t[k] for t in truths), strict=True)), {c: v[k] for c, v in others.items()},
                   names[k], "DataFrame")
        at = k.stop


def _announce(plan: ColumnPlan, where: str) -> None:
    """The Python API's notice of the columns nobody named (the CLI prints the same list)."""
    if plan.unacknowledged:
        warnings.warn(
            f"{where}: column(s) {', '.join(map(repr, plan.unacknowledged))} leave with their TRUE values "
            "(not released, named neither in keep nor in drop)", UnnamedColumnsWarning, stacklevel=4)


# ---------------------------------------------------------------------------- the columns through their kind
def _release(values: Sequence[Any], kind: Kind, where: str, name: Callable[[int], str]) -> list[tuple[Any, bool]]:
    """Each released column as an Arrow array, and whether it kept the input's type.

    ``values``: the kind's columns, as :func:`metricdp.pipeline.frames.plain_column` reads
    them; ``name`` names a refused row by its position (module docstring).
    """
    pa, _ = arrow()
    plain = [plain_column(v, c, where) for v, c in zip(values, kind.columns, strict=True)]
    batch = pa.RecordBatch.from_arrays(plain, names=list(kind.columns))
    out = release_batch(kind, batch, where, name)
    return [(o, o.type == p.type) for o, p in zip(out, plain, strict=True)]


def _released(columns: Sequence[Any], kind: Kind, where: str) -> list[Any]:
    """The kind's release of ``columns`` (Series of one frame), each a Series like its input (module docstring)."""
    lib = _library(columns[0])
    if lib == "pandas":
        index = columns[0].index
        got = _release(columns, kind, where, lambda i: _row(index[i]))
        return [_pandas_like(out, typed, s, kind) for (out, typed), s in zip(got, columns, strict=True)]
    if lib == "polars":
        got = _release([s.to_arrow() for s in columns], kind, where, str)
        return [_polars_like(out, typed, s) for (out, typed), s in zip(got, columns, strict=True)]
    raise ValidationError(f"expected a pandas or Polars Series, got {type(columns[0]).__name__}")


def _pandas_like(out: Any, typed: bool, s: Any, kind: Kind) -> Any:
    """The released Arrow array as a Series with ``s``'s index, name and dtype where the values fit it."""
    pd = import_optional("pandas", "pandas")
    pa, _ = arrow()
    dtype = s.dtype
    outputs = getattr(kind, "outputs", None)
    if isinstance(dtype, pd.CategoricalDtype) and outputs is not None:  # every output label is a category
        categories = pa.array(list(outputs), pa.string()).cast(out.type).to_pylist()
        return pd.Series(pd.Categorical(out.to_pylist(), categories=categories), index=s.index, name=s.name)
    if typed:  # back to the input's dtype (a nullable, a string or an object dtype as given)
        try:
            return pd.Series(out.to_numpy(zero_copy_only=False), index=s.index, name=s.name).astype(dtype)
        except (TypeError, ValueError):
            pass
    if pa.types.is_string(out.type) or pa.types.is_large_string(out.type):
        return pd.Series(out.to_pylist(), index=s.index, name=s.name, dtype=object)
    return pd.Series(out.to_numpy(zero_copy_only=False), index=s.index, name=s.name)  # a point: float64


def _polars_like(out: Any, typed: bool, s: Any) -> Any:
    """The released Arrow array as a Series named as ``s``, of its dtype where the values fit it."""
    pl = import_optional("polars", "polars")
    released = pl.Series(s.name, out)
    if not typed or released.dtype == s.dtype:
        return released
    try:  # a categorical or an enum of the released texts
        return released.cast(s.dtype, strict=True)
    except (pl.exceptions.PolarsError, TypeError, ValueError):
        return released


def privatize_series(series: Any, mechanism: Mechanism | NumberMechanism, rng: object = None) -> Any:
    """One release per value of a pandas or Polars Series: a Series with the same index and name.

    >>> import pandas as pd
    >>> from metricdp.spaces import MetricSpace
    >>> from metricdp.mechanisms.krr import krr
    >>> m = krr(MetricSpace.grid(1, 3, labels=["a", "b", "c"]), ldp_epsilon=1.0)
    >>> out = privatize_series(pd.Series(["a", "c"], index=[10, 20], name="city"), m)
    >>> out.index.tolist(), out.name, set(out) <= {"a", "b", "c"}
    ([10, 20], 'city', True)
    """
    name = getattr(series, "name", None)
    kind = column_kind(mechanism, name if isinstance(name, str) else "values", "Series")
    kind.source = check_release_rng(rng)
    return _released([series], kind, "Series")[0]


def privatize_frame(
    df: Any,
    *,
    column: str,
    mechanism: Mechanism | NumberMechanism,
    rng: object = None,
    keep: Iterable[str] = (),
    drop: Iterable[str] = (),
) -> tuple[Any, ColumnPlan]:
    """Release ``column`` of a pandas or Polars DataFrame (module docstring).

    Returns ``(frame, plan)``: a new frame (the input is not modified) and the
    :class:`~metricdp.tabular.columns.ColumnPlan` over the index levels and columns;
    ``plan.unreleased`` names every column (or index level) that leaves with its true
    values, and those nobody named are announced with a
    :class:`~metricdp.errors.PrivacyLeakWarning`. Raises :class:`ValidationError` naming
    the column for a bad ``column``/``keep``/``drop``, the released column in the index, a
    column holding the released values under another name (:mod:`metricdp.tabular.leaks`),
    a value not in the space or a missing value (the row by its index label), a Polars
    ``LazyFrame``.
    """
    kind = column_kind(mechanism, column, "DataFrame")

    def arm() -> None:  # the source is checked (and a seed announced) once nothing else is refused
        kind.source = check_release_rng(rng)

    return _release_frame(df, kind, keep, drop, arm)


def privatize_points_frame(
    df: Any,
    *,
    lat: str,
    lon: str,
    release: Release,
    epsilon: float | None = None,
    keep: Iterable[str] = (),
    drop: Iterable[str] = (),
) -> tuple[Any, ColumnPlan]:
    """Release the ``(lat, lon)`` columns of a pandas or Polars DataFrame together, by ``release``.

    ``release(latlon (k, 2), first_row) -> released (k, 2)`` is a release of points as
    :func:`metricdp.streaming.points.privatize_points_file` takes it (it holds its own
    randomness); the coordinates are read by the one number rule
    (:mod:`metricdp.pipeline.points`) and the released ones are float64 columns. What
    leaves is decided as for :func:`privatize_frame`: a column that looks like a coordinate
    by name, or holds the true coordinates (within ``2/epsilon`` km; 1 km when ``epsilon``
    is not given) in most compared rows, is refused unless ``keep`` names it. Returns
    ``(frame, plan)`` as :func:`privatize_frame` does; a frame with no rows is refused.
    """
    if lat == lon:
        raise ValidationError(f"DataFrame: lat and lon name the same column {lat!r}")
    from .pipeline.points import PointPairs

    return _release_frame(df, PointPairs(lat, lon, release, epsilon=epsilon, where="DataFrame"), keep, drop, None)


def _release_frame(df: Any, kind: Kind, keep: Iterable[str], drop: Iterable[str],
                   arm: Callable[[], None] | None) -> tuple[Any, ColumnPlan]:
    """``kind``'s release of its columns of ``df``, after the checks of what leaves; ``arm`` readies the
    kind's randomness between the checks and the release."""
    lib = _library(df)
    if lib == "polars" and type(df).__name__ == "LazyFrame":
        raise ValidationError("a Polars LazyFrame is not released: collect() it first (what leaves is decided "
                              "on its rows, before anything is released)")
    if lib not in ("pandas", "polars") or not hasattr(df, "columns") or hasattr(df, "to_frame"):
        raise ValidationError(f"expected a pandas or Polars DataFrame, got {type(df).__name__}")
    names, levels = frame_layout(df, kind.columns, index=lib == "pandas")
    plan = plan_columns([*levels, *names], list(kind.columns), keep=keep, drop=drop, where="DataFrame")
    check_names(plan.header, plan.unacknowledged, kind.rule(), "DataFrame")
    _check_leaks(df, lib, plan, levels, kind)
    if arm is not None:
        arm()
    released = _released([df[c] for c in kind.columns], kind, "DataFrame")
    _announce(plan, "DataFrame")
    if lib == "pandas":
        out = df.copy()
        for column, values in zip(kind.columns, released, strict=True):
            out[column] = values
        gone = [c for c in plan.dropped if c in levels]
        if gone:
            out = out.reset_index(level=[levels.index(c) for c in gone], drop=True)
        return out.drop(columns=[c for c in plan.dropped if c not in levels]), plan
    return df.with_columns(released).drop(list(plan.dropped)), plan


def frame_layout(df: Any, released: Sequence[str], *, index: bool) -> tuple[list[str], list[str]]:
    """A frame's column names and (``index``: a pandas frame, or a Dask frame's pandas ``_meta``)
    its index levels as planned (:func:`_index_levels`), refused in one error where a column
    name is not text or a ``released`` column lives in the index (written with its true values)."""
    names = list(df.columns)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ValidationError(f"DataFrame column names must be text; column {bad[0]!r} is not")
    levels = _index_levels(df, names) if index else []
    for column in released:
        if column in levels:
            raise ValidationError(f"DataFrame: column {column!r} is in the index, which is written with its true "
                                  "values; move it to the columns (reset_index) to release it")
    return names, levels


def _index_levels(df: Any, columns: Sequence[str]) -> list[str]:
    """The names of a pandas frame's index levels as planned (module docstring); [] for a default RangeIndex.

    A level named like a column (``set_index("id", drop=False)``) is planned as ``"id (index)"``.
    """
    pd = import_optional("pandas", "pandas")
    index = df.index
    if isinstance(index, pd.RangeIndex) and index.name is None:
        return []
    raw = list(index.names)
    bad = [n for n in raw if n is not None and not isinstance(n, str)]
    if bad:
        raise ValidationError(f"DataFrame index level names must be text; level {bad[0]!r} is not")
    if len(raw) == 1:
        named = [raw[0] if raw[0] is not None else "index"]
    else:
        named = [n if n is not None else f"level_{k}" for k, n in enumerate(raw)]
    return [f"{n} (index)" if n in columns else n for n in named]


class PrivatizeTransformer:
    """A scikit-learn compatible transformer that releases one column (or a 1-d input).

    ``fit`` learns nothing: the mechanism is fixed in advance (built from public data), so
    fitting on private data must not and does not read it; ``transform`` releases the
    ``column`` of a DataFrame (keeping the others, as :func:`privatize_frame` with ``keep``
    and ``drop``), a Series, or a 1-d array / one-column 2-d array of labels. Each
    ``transform`` draws fresh noise: calling it twice on the same rows releases them twice
    (two eps spent per row). ``rng`` as everywhere (None: the secure source).
    scikit-learn itself is not needed: ``get_params`` / ``set_params`` make ``clone`` and
    ``Pipeline`` work, and ``set_output(transform="pandas" | "polars" | "default")``
    chooses the container of the output as scikit-learn's does.
    """

    _PARAMS = ("mechanism", "column", "rng", "keep", "drop")

    def __init__(self, mechanism: Mechanism | NumberMechanism, column: str | None = None, rng: object = None,
                 keep: Iterable[str] = (), drop: Iterable[str] = ()) -> None:
        self.mechanism = mechanism
        self.column = column
        self.rng = rng
        self.keep = keep
        self.drop = drop
        self._output = "default"

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self._PARAMS}

    def set_params(self, **params: Any) -> PrivatizeTransformer:
        for key, value in params.items():
            if key not in self._PARAMS:
                raise ValidationError(f"PrivatizeTransformer has no parameter {key!r}")
            setattr(self, key, value)
        return self

    def set_output(self, *, transform: str | None = None) -> PrivatizeTransformer:
        """The container ``transform`` returns: ``"pandas"`` or ``"polars"`` (a DataFrame), ``"default"`` (as given).

        A Series or an array becomes a one-column frame named by ``column`` (or the
        Series' name, else ``x0``). ``None`` leaves the setting unchanged.
        """
        if transform is None:
            return self
        if transform not in ("default", "pandas", "polars"):
            raise ValidationError(f"set_output: transform must be 'default', 'pandas' or 'polars', got {transform!r}")
        if transform != "default":
            import_optional(transform, transform)
        self._output = transform
        return self

    def fit(self, X: Any = None, y: Any = None) -> PrivatizeTransformer:
        """Learn nothing (the data is not read) and return self."""
        return self

    def transform(self, X: Any) -> Any:
        """Release the data (see the class docstring)."""
        return self._as_output(self._transform(X))

    def _transform(self, X: Any) -> Any:
        if _library(X) and hasattr(X, "columns") and not hasattr(X, "to_frame"):
            if self.column is None:
                raise ValidationError("PrivatizeTransformer needs column= to transform a DataFrame")
            return privatize_frame(X, column=self.column, mechanism=self.mechanism, rng=self.rng, keep=self.keep,
                                   drop=self.drop)[0]
        if _library(X) == "polars" and type(X).__name__ == "LazyFrame":
            raise ValidationError("a Polars LazyFrame is not released: collect() it first (what leaves is decided "
                                  "on its rows, before anything is released)")
        if _library(X):
            return privatize_series(X, self.mechanism, self.rng)
        arr = np.asarray(X, dtype=object)
        if arr.ndim == 2 and arr.shape[1] == 1:
            return self._transform(arr[:, 0]).reshape(-1, 1)
        if arr.ndim != 1:
            raise ValidationError(f"PrivatizeTransformer transforms a 1-d input or one column, got shape {arr.shape}")
        kind = column_kind(self.mechanism, self.column or "x0", "input")
        kind.source = check_release_rng(self.rng)
        return _release([arr], kind, "input", str)[0][0].to_numpy(zero_copy_only=False)

    def _as_output(self, out: Any) -> Any:
        if self._output == "default" or (_library(out) == self._output and hasattr(out, "columns")):
            return out
        lib = import_optional(self._output, self._output)
        if _library(out) and hasattr(out, "columns"):  # a frame of the other library
            return out.to_pandas() if self._output == "pandas" else lib.from_pandas(out)
        name = self.column or (getattr(out, "name", None) if _library(out) else None) or "x0"
        values = np.asarray(out.to_numpy() if _library(out) else out, dtype=object).reshape(-1)
        if self._output == "pandas":
            index = out.index if _library(out) == "pandas" else None
            return lib.DataFrame({name: values}, index=index)
        return lib.DataFrame({name: values.tolist()})

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        return self.fit(X, y).transform(X)

    def __repr__(self) -> str:
        name = getattr(self.mechanism, "name", type(self.mechanism).__name__)  # a NumberMechanism has no name
        return f"PrivatizeTransformer(mechanism={name!r}, column={self.column!r})"
