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
* :func:`privatize_series` -- ``Mechanism.privatize`` for a Series: same index, same name.
* :class:`PrivatizeTransformer` -- the same as a scikit-learn transformer (``fit`` /
  ``transform`` / ``get_params`` / ``set_output``), duck-typed, so that scikit-learn is not
  needed to import it; ``fit`` reads nothing from the data.

Values are matched to the space's labels as text (``str(value)``, as
:meth:`Mechanism.privatize` does); values not in the space and missing values are
refused with one error naming the column, the values and the first row by its index label
(Polars: its row number). Randomness: ``rng=None`` is
the OS's secure source; anything else warns (:class:`~metricdp.errors.PrivacyLeakWarning`)
once per call. pandas and Polars are optional (extras ``pandas`` and ``polars``); neither
is imported unless a frame of that library is passed.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._optional import import_optional
from ._random import RandomSource, check_release_rng
from .errors import UnnamedColumnsWarning, ValidationError
from .mechanisms.base import Mechanism
from .tabular.columns import ColumnPlan, plan_columns
from .tabular.leaks import SCAN_ROWS, LeakRule, check_rows, spread

__all__ = ["PrivatizeTransformer", "privatize_frame", "privatize_series"]


def _library(obj: object) -> str:
    root = type(obj).__module__.split(".")[0]
    return root if root in ("pandas", "polars") else ""


def _row(label: object) -> str:
    """A row's index label as an error names it: ``'r20134'``, ``7`` (numpy scalars as Python values)."""
    return repr(label.item() if isinstance(label, np.generic) else label)


def _release(values: NDArray[Any], mechanism: Mechanism, source: RandomSource, where: str,
             labels: Sequence[object] | None = None) -> NDArray[Any]:
    """Output labels (object array) for the true values, each distinct value looked up once.

    ``labels`` name the rows in errors (a pandas index; None: positions, as ``row N``).
    """
    from .mechanisms.numeric import NumberMechanism

    def name(i: int) -> str:
        return _row(labels[i]) if labels is not None else str(i)

    if isinstance(mechanism, NumberMechanism):  # a numeric column on a grid: values read as numbers
        try:
            return mechanism.release_labels(values, source, where=where)
        except ValidationError as exc:  # the grid's positions, named as rows
            raise ValidationError(re.sub(r"position (\d+):", lambda m: f"row {name(int(m.group(1)))}:",
                                         str(exc))) from None
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    uniq, inverse = np.unique(values.astype(str), return_inverse=True)
    try:
        idx = mechanism.space.index(uniq.tolist())
    except ValidationError as exc:
        known = set(mechanism.space.labels)
        first = next(i for i, k in enumerate(inverse.ravel().tolist()) if uniq[k] not in known)
        raise ValidationError(f"{where}: {exc} (first at row {name(first)})") from None
    out = mechanism.sample(idx[inverse.ravel()], source)
    return np.asarray(mechanism.output_labels, dtype=object)[out]


def _rule(column: str, mechanism: object) -> LeakRule:
    from .mechanisms.numeric import NumberMechanism

    return LeakRule.numbers(column, mechanism) if isinstance(mechanism, NumberMechanism) else LeakRule.labels(column)


def _check_leaks(df: Any, lib: str, plan: ColumnPlan, levels: list[str], column: str, mechanism: Mechanism) -> None:
    """:func:`metricdp.tabular.leaks.check_rows` over chunks of a frame's rows (pandas rows named by index label).

    Only the compared rows of each chunk are read (:func:`~metricdp.tabular.leaks.spread`),
    so the check costs :data:`~metricdp.tabular.leaks.SAMPLE` rows per chunk, not a copy of
    the frame.
    """
    if not plan.unacknowledged:
        return
    n = len(df)
    starts = list(range(0, n, SCAN_ROWS))
    picks = [[start + i for i in spread(min(n - start, SCAN_ROWS))] for start in starts]
    flat = [i for pick in picks for i in pick]
    if lib == "pandas":
        part = df.iloc[flat]
        truth = part[column].to_numpy(dtype=object)
        others = {c: (part.index.get_level_values(levels.index(c)) if c in levels else part[c]).to_numpy(dtype=object)
                  for c in plan.unacknowledged}
        names = [_row(label) for label in part.index]
    else:
        part = df[flat]
        truth = np.asarray(part[column].to_list(), dtype=object)
        others = {c: np.asarray(part[c].to_list(), dtype=object) for c in plan.unacknowledged}
        names = [str(i) for i in flat]
    rule = _rule(column, mechanism)
    at = 0
    for pick in picks:
        k = slice(at, at + len(pick))
        check_rows(rule, [(t,) for t in truth[k]], {c: v[k] for c, v in others.items()}, names[k], "DataFrame")
        at += len(pick)


def _announce(plan: ColumnPlan, where: str) -> None:
    """The Python API's notice of the columns nobody named (the CLI prints the same list)."""
    if plan.unacknowledged:
        warnings.warn(
            f"{where}: column(s) {', '.join(map(repr, plan.unacknowledged))} leave with their TRUE values "
            "(not released, named neither in keep nor in drop)", UnnamedColumnsWarning, stacklevel=3)


# ---------------------------------------------------------------------------- pandas
def _pandas_series(s: Any, mechanism: Mechanism, source: RandomSource, where: str) -> Any:
    pd = import_optional("pandas", "pandas")
    missing = s.isna().to_numpy()
    if missing.any():
        raise ValidationError(f"{where}: missing value at row {_row(s.index[int(np.argmax(missing))])}")
    labels = _release(s.to_numpy(dtype=object), mechanism, source, where, s.index)
    out = pd.Series(labels, index=s.index, name=s.name, dtype=object)
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return out.astype(pd.CategoricalDtype(categories=list(mechanism.output_labels)))
    if dtype == np.dtype(object):
        return out
    if dtype.kind == "b":
        flags = out.map({"True": True, "False": False})
        return flags.astype(dtype) if not flags.isna().any() else out
    try:  # numbers and strings: back to the input's dtype when the labels fit it
        cast = pd.to_numeric(out) if dtype.kind in "iuf" else out
        return cast.astype(dtype)
    except (TypeError, ValueError):
        return out


# ---------------------------------------------------------------------------- polars
def _polars_series(s: Any, mechanism: Mechanism, source: RandomSource, where: str) -> Any:
    pl = import_optional("polars", "polars")
    if s.null_count():
        first = int(np.argmax(s.is_null().to_numpy()))
        raise ValidationError(f"{where}: missing value at row {first}")
    labels = _release(s.to_numpy().astype(object), mechanism, source, where)
    out = pl.Series(s.name, labels.astype(str).tolist(), dtype=pl.String)
    if s.dtype == pl.String:
        return out
    if s.dtype == pl.Categorical:
        return out.cast(pl.Categorical)
    try:
        return out.cast(s.dtype, strict=True)
    except (pl.exceptions.PolarsError, TypeError, ValueError):
        return out


def _series(s: Any, mechanism: Mechanism, source: RandomSource, where: str) -> Any:
    lib = _library(s)
    if lib == "pandas":
        return _pandas_series(s, mechanism, source, where)
    if lib == "polars":
        return _polars_series(s, mechanism, source, where)
    raise ValidationError(f"expected a pandas or Polars Series, got {type(s).__name__}")


def privatize_series(series: Any, mechanism: Mechanism, rng: object = None) -> Any:
    """One release per value of a pandas or Polars Series: a Series with the same index and name.

    >>> import pandas as pd
    >>> from metricdp.spaces import MetricSpace
    >>> from metricdp.mechanisms.krr import krr
    >>> m = krr(MetricSpace.grid(1, 3, labels=["a", "b", "c"]), ldp_epsilon=1.0)
    >>> out = privatize_series(pd.Series(["a", "c"], index=[10, 20], name="city"), m)
    >>> out.index.tolist(), out.name, set(out) <= {"a", "b", "c"}
    ([10, 20], 'city', True)
    """
    source = check_release_rng(rng)
    return _series(series, mechanism, source, f"series {getattr(series, 'name', None)!r}")


def privatize_frame(
    df: Any,
    *,
    column: str,
    mechanism: Mechanism,
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
    lib = _library(df)
    if lib == "polars" and type(df).__name__ == "LazyFrame":
        raise ValidationError("a Polars LazyFrame is not released: collect() it first (what leaves is decided "
                              "on its rows, before anything is released)")
    if lib not in ("pandas", "polars") or not hasattr(df, "columns") or hasattr(df, "to_frame"):
        raise ValidationError(f"expected a pandas or Polars DataFrame, got {type(df).__name__}")
    names = list(df.columns)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ValidationError(f"DataFrame column names must be text; column {bad[0]!r} is not")
    levels = _index_levels(df, names) if lib == "pandas" else []
    if column in levels:
        raise ValidationError(f"DataFrame: column {column!r} is in the index, which is written with its true values; "
                              "move it to the columns (reset_index) to release it")
    plan = plan_columns([*levels, *names], [column], keep=keep, drop=drop, where="DataFrame")
    _check_leaks(df, lib, plan, levels, column, mechanism)
    where = f"DataFrame column {column!r}"
    source = check_release_rng(rng)
    released = _series(df[column], mechanism, source, where)
    _announce(plan, "DataFrame")
    if lib == "pandas":
        out = df.copy()
        out[column] = released
        gone = [c for c in plan.dropped if c in levels]
        if gone:
            out = out.reset_index(level=[levels.index(c) for c in gone], drop=True)
        return out.drop(columns=[c for c in plan.dropped if c not in levels]), plan
    return df.with_columns(released).drop(list(plan.dropped)), plan


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

    def __init__(self, mechanism: Mechanism, column: str | None = None, rng: object = None,
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
        source = check_release_rng(self.rng)
        return _release(arr, self.mechanism, source, "input")

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
        return f"PrivatizeTransformer(mechanism={self.mechanism.name!r}, column={self.column!r})"
