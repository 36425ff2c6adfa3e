"""DataFrames in, DataFrames out: pandas and Polars, Series, and a scikit-learn transformer.

* :func:`privatize_frame` -- release one column of a pandas or Polars DataFrame through a
  :class:`~metricdp.mechanisms.base.Mechanism`; the index (pandas), the row order, the
  other columns and their dtypes are kept, and the released column keeps its dtype
  wherever the output labels fit it (integers stay integers, a categorical column becomes
  a categorical of the output labels, text stays text). It returns the frame and the
  :class:`~metricdp.tabular.columns.ColumnPlan` of the release pipeline: which columns
  leave with their TRUE values (``unreleased``), which of those nobody named
  (``unacknowledged``), and which were dropped, by the same rules as the file commands
  (``keep`` / ``drop``: an unknown name or a released column in either is refused).
* :func:`privatize_series` -- ``Mechanism.privatize`` for a Series: same index, same name.
* :class:`PrivatizeTransformer` -- the same as a scikit-learn transformer (``fit`` /
  ``transform`` / ``get_params``), duck-typed, so that scikit-learn is not needed to
  import it; ``fit`` reads nothing from the data.

Values are matched to the space's labels as text (``str(value)``, as
:meth:`Mechanism.privatize` does); values not in the space and missing values are
refused with one error naming the column and the values. Randomness: ``rng=None`` is
the OS's secure source; anything else warns (:class:`~metricdp.errors.PrivacyLeakWarning`)
once per call. pandas and Polars are optional (extras ``pandas`` and ``polars``); neither
is imported unless a frame of that library is passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._optional import import_optional
from ._random import RandomSource, check_release_rng
from .errors import ValidationError
from .mechanisms.base import Mechanism
from .tabular.columns import ColumnPlan, plan_columns

__all__ = ["PrivatizeTransformer", "privatize_frame", "privatize_series"]


def _library(obj: object) -> str:
    root = type(obj).__module__.split(".")[0]
    return root if root in ("pandas", "polars") else ""


def _release(values: NDArray[Any], mechanism: Mechanism, source: RandomSource, where: str) -> NDArray[Any]:
    """Output labels (object array) for the true values, each distinct value looked up once."""
    from .mechanisms.numeric import NumberMechanism

    if isinstance(mechanism, NumberMechanism):  # a numeric column on a grid (issue 36): values read as numbers
        return mechanism.release_labels(values, source, where=where)
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    uniq, inverse = np.unique(values.astype(str), return_inverse=True)
    try:
        idx = mechanism.space.index(uniq.tolist())
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None
    out = mechanism.sample(idx[inverse.ravel()], source)
    return np.asarray(mechanism.output_labels, dtype=object)[out]


# ---------------------------------------------------------------------------- pandas
def _pandas_series(s: Any, mechanism: Mechanism, source: RandomSource, where: str) -> Any:
    pd = import_optional("pandas", "pandas")
    missing = s.isna().to_numpy()
    if missing.any():
        raise ValidationError(f"{where}: missing value at index {s.index[int(np.argmax(missing))]!r}")
    labels = _release(s.to_numpy(dtype=object), mechanism, source, where)
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
    :class:`~metricdp.tabular.columns.ColumnPlan`; ``plan.unreleased`` names every column
    that leaves with its true values. Raises :class:`ValidationError` naming the column
    for a bad ``column``/``keep``/``drop``, a value not in the space or a missing value.
    """
    lib = _library(df)
    if lib not in ("pandas", "polars") or not hasattr(df, "columns") or hasattr(df, "to_frame"):
        raise ValidationError(f"expected a pandas or Polars DataFrame, got {type(df).__name__}")
    names = list(df.columns)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ValidationError(f"DataFrame column names must be text; column {bad[0]!r} is not")
    plan = plan_columns(names, [column], keep=keep, drop=drop, where="DataFrame")
    source = check_release_rng(rng)
    released = _series(df[column], mechanism, source, f"DataFrame column {column!r}")
    if lib == "pandas":
        out = df.copy()
        out[column] = released
        return out.drop(columns=list(plan.dropped)), plan
    return df.with_columns(released).drop(list(plan.dropped)), plan


class PrivatizeTransformer:
    """A scikit-learn compatible transformer that releases one column (or a 1-d input).

    ``fit`` learns nothing: the mechanism is fixed in advance (built from public data), so
    fitting on private data must not and does not read it; ``transform`` releases the
    ``column`` of a DataFrame (keeping the others, as :func:`privatize_frame`), a Series, or
    a 1-d array / one-column 2-d array of labels. Each ``transform`` draws fresh noise:
    calling it twice on the same rows releases them twice (two eps spent per row).
    ``rng`` as everywhere (None: the secure source). scikit-learn itself is not needed:
    ``get_params`` / ``set_params`` make ``clone`` and ``Pipeline`` work.
    """

    def __init__(self, mechanism: Mechanism, column: str | None = None, rng: object = None) -> None:
        self.mechanism = mechanism
        self.column = column
        self.rng = rng

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "column": self.column, "rng": self.rng}

    def set_params(self, **params: Any) -> PrivatizeTransformer:
        for key, value in params.items():
            if key not in ("mechanism", "column", "rng"):
                raise ValidationError(f"PrivatizeTransformer has no parameter {key!r}")
            setattr(self, key, value)
        return self

    def fit(self, X: Any = None, y: Any = None) -> PrivatizeTransformer:
        """Learn nothing (the data is not read) and return self."""
        return self

    def transform(self, X: Any) -> Any:
        """Release the data (see the class docstring)."""
        if _library(X) and hasattr(X, "columns") and not hasattr(X, "to_frame"):
            if self.column is None:
                raise ValidationError("PrivatizeTransformer needs column= to transform a DataFrame")
            return privatize_frame(X, column=self.column, mechanism=self.mechanism, rng=self.rng)[0]
        if _library(X):
            return privatize_series(X, self.mechanism, self.rng)
        arr = np.asarray(X, dtype=object)
        if arr.ndim == 2 and arr.shape[1] == 1:
            return self.transform(arr[:, 0]).reshape(-1, 1)
        if arr.ndim != 1:
            raise ValidationError(f"PrivatizeTransformer transforms a 1-d input or one column, got shape {arr.shape}")
        source = check_release_rng(self.rng)
        return _release(arr, self.mechanism, source, "input")

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        return self.fit(X, y).transform(X)

    def __repr__(self) -> str:
        return f"PrivatizeTransformer(mechanism={self.mechanism.name!r}, column={self.column!r})"
