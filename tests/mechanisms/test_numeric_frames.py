"""Numeric mechanisms on pandas and Polars columns (privatize_frame / privatize_series): index, dtypes, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.frames import privatize_frame, privatize_series
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from tests.helpers import import_or_skip

pd = import_or_skip("pandas", "pandas")

AGES = number_mechanism(NumericGrid(0, 99, 1), 0.5)


def test_pandas_frame_of_mixed_columns_keeps_index_and_dtypes():
    df = pd.DataFrame({"user": [7, 8, 9], "age": [20, 35, 99], "spend": [1.5, 2.0, 9.9]},
                      index=pd.Index(["a", "b", "c"], name="row"))
    out, plan = privatize_frame(df, column="age", mechanism=AGES, keep=["row", "user"], drop=["spend"])
    assert out.index.equals(df.index) and list(out.columns) == ["user", "age"]
    assert out["age"].dtype == np.int64 and out["age"].between(0, 99).all()
    assert plan.unreleased == ("row", "user") and plan.unacknowledged == ()  # the named index leaves too
    assert df["age"].tolist() == [20, 35, 99]  # the input is not modified


def test_float_and_text_columns_and_discrete_laplace():
    m = number_mechanism(NumericGrid("0.0", "2.0", "0.5"), 1.0, "discrete-laplace")
    s = pd.Series([0.5, 1.0, 2.0], index=[3, 1, 2], name="kwh")
    out = privatize_series(s, m)
    assert out.index.tolist() == [3, 1, 2] and out.dtype == np.float64 and out.name == "kwh"
    assert all((2 * out).round() == 2 * out)  # grid points, possibly past the range
    text = privatize_series(pd.Series([" 1.5", "+2"], dtype=object), m)
    assert text.dtype == object and all(isinstance(x, str) for x in text)


def test_refusals_name_the_column_and_rows():
    df = pd.DataFrame({"age": [20, 120, 4]})
    with pytest.raises(ValidationError, match=r"column 'age': 1 value\(s\) .*row 1: '120' \(outside the range\)"):
        privatize_frame(df, column="age", mechanism=AGES)
    with pytest.raises(ValidationError, match=r"row 0: '1_0' \(not a number\)"):
        privatize_series(pd.Series(["1_0", "3"], name="a"), AGES)
    with pytest.raises(ValidationError, match=r"row 1: 'null' \(empty\)"):
        privatize_series(pd.Series([1.0, None]), AGES)


def test_polars_column():
    pl = import_or_skip("polars", "polars")
    df = pl.DataFrame({"id": [1, 2, 3], "age": [10, 20, 30]})
    out, _ = privatize_frame(df, column="age", mechanism=AGES, keep=["id"])
    assert out.schema == df.schema and out["id"].to_list() == [1, 2, 3]
    assert all(0 <= v <= 99 for v in out["age"].to_list())
