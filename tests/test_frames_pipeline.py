"""DataFrames through the release pipeline's kinds (metricdp.frames over metricdp.pipeline.frames)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.frames import PrivatizeTransformer, privatize_frame, privatize_points_frame, privatize_series
from metricdp.mechanisms.krr import krr
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.pipeline.labels import Labels
from metricdp.pipeline.numbers import Numbers
from metricdp.spaces import MetricSpace
from metricdp.tabular.formats import BatchChunk
from tests.helpers import import_or_skip

pd = import_or_skip("pandas", "pandas")

CITY = krr(MetricSpace.grid(1, 3, labels=["paris", "london", "rome"]), ldp_epsilon=1.0)
DIGITS = krr(MetricSpace.grid(1, 3, labels=["1", "2", "3"]), ldp_epsilon=1.0)
AGES = number_mechanism(NumericGrid(0, 9, 1), 0.5)
HALVES = number_mechanism(NumericGrid("0", "2", "0.5"), 1.0)


def _polars() -> Any:
    return import_or_skip("polars", "polars")


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every parse of a kind: (the kind's class name, the chunk it read)."""
    seen: list[tuple[str, Any]] = []
    for cls in (Labels, Numbers):
        def spy(self: Any, chunk: Any, _parse: Any = cls.parse) -> Any:
            seen.append((type(self).__name__, chunk))
            return _parse(self, chunk)

        monkeypatch.setattr(cls, "parse", spy)
    return seen


# ------------------------------------------------------------------ the kinds parse, refuse and release
@pytest.mark.parametrize(("mechanism", "values", "kind"), [(CITY, ["rome", "paris"], "Labels"),
                                                           (AGES, [3, 9], "Numbers")])
def test_pandas_and_polars_columns_go_through_the_kind(parsed: list[tuple[str, Any]], mechanism: Any,
                                                       values: list[Any], kind: str) -> None:
    pl = _polars()
    privatize_frame(pd.DataFrame({"v": values}), column="v", mechanism=mechanism)
    privatize_frame(pl.DataFrame({"v": values}), column="v", mechanism=mechanism)
    privatize_series(pd.Series(values, name="v"), mechanism)
    assert [name for name, _ in parsed] == [kind] * 3
    assert all(isinstance(chunk, BatchChunk) and chunk.rows == 2 and chunk.batch.schema.names == ["v"]
               for _, chunk in parsed)


def test_a_refused_label_names_the_pandas_index_label_and_the_polars_row() -> None:
    pl = _polars()
    df = pd.DataFrame({"city": ["rome", "berlin", "paris", "oslo"]}, index=pd.Index(["a", "b", "c", "d"], name="k"))
    with pytest.raises(ValidationError, match=r"^DataFrame: column 'city': 2 value\(s\) not in the space's labels: "
                                              r"'berlin', 'oslo' \(2 row\(s\); first at row\(s\) 'b', 'd'\)"):
        privatize_frame(df, column="city", mechanism=CITY, keep=["k"])
    with pytest.raises(ValidationError, match=r"first at row\(s\) 1, 3\)"):
        privatize_frame(pl.DataFrame({"city": ["rome", "berlin", "paris", "oslo"]}), column="city", mechanism=CITY)


def test_a_refused_number_names_the_pandas_index_label_and_the_polars_row() -> None:
    pl = _polars()
    df = pd.DataFrame({"age": [3, 12, 4]}, index=pd.Index([100, 205, 300]))
    with pytest.raises(ValidationError, match=r"^DataFrame: column 'age': 1 value\(s\) cannot be released on the grid "
                                              r"0\.\.9 step 1 \(outside the range 1\); first: row 205: '12' "
                                              r"\(outside the range\)"):
        privatize_frame(df, column="age", mechanism=AGES, keep=["index"])
    with pytest.raises(ValidationError, match=r"first: row 0: 'x' \(not a number\); row 2: 'null' \(empty\)"):
        privatize_frame(pl.DataFrame({"age": ["x", "3", None]}), column="age", mechanism=AGES)


def test_a_value_that_reads_like_a_place_is_shown_as_it_is() -> None:
    s = pd.Series(["rome", "row 0", "row(s) 1"], index=["x", "y", "z"], name="city")
    with pytest.raises(ValidationError, match=r"'row 0', 'row\(s\) 1' \(2 row\(s\); first at row\(s\) 'y', 'z'\)"):
        privatize_series(s, CITY)


def test_a_float_column_reads_labels_by_the_file_rule() -> None:
    # Arrow's text of the float 1.0 is "1", as a Parquet float column is read
    out = privatize_series(pd.Series([1.0, 3.0], name="d"), DIGITS)
    assert out.dtype == np.float64 and set(out) <= {1.0, 2.0, 3.0}


def test_a_column_of_missing_values_only_is_refused_row_by_row() -> None:
    with pytest.raises(ValidationError, match=r"'null' \(2 row\(s\); first at row\(s\) 'a', 'b'\)"):
        privatize_series(pd.Series([None, None], index=["a", "b"], dtype=object), CITY)


def test_a_column_of_mixed_types_is_refused() -> None:
    with pytest.raises(ValidationError, match="column 'v' does not hold values of one type"):
        privatize_frame(pd.DataFrame({"v": pd.Series(["1", 2], dtype=object)}), column="v", mechanism=DIGITS)


# ------------------------------------------------------------------ written back with the frame's dtypes
def test_dtypes_kept_where_the_outputs_fit_them() -> None:
    pl = _polars()
    cat = privatize_series(pd.Series(pd.Categorical(["rome", "paris"])), CITY)
    assert list(cat.cat.categories) == ["paris", "london", "rome"]  # every output label, in the mechanism's order
    assert privatize_series(pd.Series([1, 2], dtype="Int16"), AGES).dtype == "Int16"
    assert privatize_series(pd.Series(["1", "2"], dtype="string"), AGES).dtype == "string"
    # a grid of halves does not fit an integer column: the released values are text
    halves = privatize_series(pd.Series([1, 2], dtype="int64"), HALVES)
    assert halves.dtype == object and all(isinstance(v, str) for v in halves)
    assert privatize_series(pl.Series("h", [1, 2]), HALVES).dtype == pl.String
    assert privatize_series(pl.Series("c", ["rome"], dtype=pl.Categorical), CITY).dtype == pl.Categorical
    assert privatize_series(pl.Series("a", [1, 2], dtype=pl.UInt8), AGES).dtype == pl.UInt8


def test_transformer_array_keeps_its_type() -> None:
    t = PrivatizeTransformer(AGES, column="age")
    assert repr(t) == "PrivatizeTransformer(mechanism='NumberMechanism', column='age')"
    ints = t.transform(np.array([1, 5, 9]))
    assert ints.dtype == np.int64 and ints.shape == (3,) and set(ints.tolist()) <= set(range(10))
    with pytest.raises(ValidationError, match=r"input: column 'age': .*row 1: '12'"):
        t.transform(np.array(["1", "12"], dtype=object))


# ------------------------------------------------------------------ points: (lat, lon) released together
def _shift(points: np.ndarray, first_row: int) -> np.ndarray:
    return points + np.array([0.25, -0.5])  # ~28-55 km away: never within the 2 km scale of eps = 1/km


def _places() -> Any:
    return pd.DataFrame({"id": ["a", "b", "c"], "lat": [48.1, 48.2, 48.3], "lon": ["11.5", "11.6", "11.7"]},
                        index=pd.Index(["r1", "r2", "r3"], name="key"))


def test_points_of_a_pandas_frame_are_released_together_as_floats() -> None:
    df = _places()
    out, plan = privatize_points_frame(df, lat="lat", lon="lon", release=_shift, epsilon=1.0, keep=["key", "id"])
    assert out.index.equals(df.index) and list(out.columns) == ["id", "lat", "lon"]
    pd.testing.assert_series_equal(out["id"], df["id"])
    assert out["lat"].tolist() == [48.35, 48.45, 48.55] and out["lon"].tolist() == [11.0, 11.1, 11.2]
    assert out["lon"].dtype == np.float64  # a text column of coordinates is read by the number rule
    assert plan.released == ("lat", "lon") and plan.unreleased == ("key", "id")


def test_points_refusals_name_the_row_by_its_index_label_or_number() -> None:
    pl = _polars()
    for bad, why in [(None, "is empty"), ("x", "is 'x', not a number")]:
        df = _places().assign(lon=["11.5", bad, "11.7"])
        with pytest.raises(ValidationError, match=f"^DataFrame: data row 'r2': column 'lon' {why}"):
            privatize_points_frame(df, lat="lat", lon="lon", release=_shift, keep=["key", "id"])
    with pytest.raises(ValidationError, match=r"^DataFrame: data row 1: column 'lat' is empty"):
        privatize_points_frame(pl.DataFrame({"lat": [1.0, None], "lon": [2.0, 3.0]}), lat="lat", lon="lon",
                               release=_shift)
    with pytest.raises(ValidationError, match="no data rows"):
        privatize_points_frame(pl.DataFrame({"lat": [1.0], "lon": [2.0]}).head(0), lat="lat", lon="lon",
                               release=_shift)
    with pytest.raises(ValidationError, match="same column"):
        privatize_points_frame(_places(), lat="lat", lon="lat", release=_shift)


def test_points_leaks_refused_by_name_and_by_content() -> None:
    pl = _polars()
    df = _places().assign(latitude=[48.1, 48.2, 48.3])
    with pytest.raises(ValidationError, match="'latitude' look like the released coordinates"):
        privatize_points_frame(df, lat="lat", lon="lon", release=_shift, keep=["key", "id"])
    where = pl.DataFrame({"lat": [48.1, 48.2], "lon": [11.5, 11.6], "home": ["48.1,11.5", "48.2,11.6"]})
    with pytest.raises(ValidationError, match=r"column 'home' holds coordinates .* first at row 0"):
        privatize_points_frame(where, lat="lat", lon="lon", release=_shift, epsilon=1.0)
    out, plan = privatize_points_frame(where, lat="lat", lon="lon", release=_shift, epsilon=1.0, drop=["home"])
    assert out.columns == ["lat", "lon"] and out["lat"].to_list() == [48.35, 48.45] and plan.dropped == ("home",)


# ------------------------------------------------------------------ property: only the released column changes
@st.composite
def frames(draw: Any) -> tuple[dict[str, tuple[list[Any], str]], Any, set[str]]:
    """Columns of a small frame, ``name: (values, type)``: ``v`` to release (labels or numbers), others."""
    n = draw(st.integers(0, 8))
    mechanism = draw(st.sampled_from([CITY, DIGITS, AGES]))
    if mechanism is CITY:
        v: list[Any] = draw(st.lists(st.sampled_from(["paris", "london", "rome"]), min_size=n, max_size=n))
        outputs = {"paris", "london", "rome"}
    else:
        top = 3 if mechanism is DIGITS else 9
        v = draw(st.lists(st.integers(1 if mechanism is DIGITS else 0, top), min_size=n, max_size=n))
        outputs = {str(x) for x in mechanism.output_labels}
    columns = {"v": (v, "text" if mechanism is CITY else "int")}
    for k in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["int", "text", "float"]))
        element = {"int": st.integers(-5, 5), "text": st.text("ab", max_size=2),
                   "float": st.floats(-1, 1, allow_nan=False)}[kind]
        columns[f"c{k}"] = (draw(st.lists(element, min_size=n, max_size=n)), kind)
    return columns, mechanism, outputs


def _text(value: Any) -> str:
    return str(int(value)) if isinstance(value, float | np.floating) and float(value).is_integer() else str(value)


@settings(max_examples=40, deadline=None)
@given(case=frames(), polars=st.booleans())
def test_only_the_released_column_changes_and_it_holds_output_labels(case: Any, polars: bool) -> None:
    columns, mechanism, outputs = case
    others = [c for c in columns if c != "v"]
    n = len(columns["v"][0])
    if polars:
        pl = _polars()
        types = {"int": pl.Int64, "text": pl.String, "float": pl.Float64}
        df = pl.DataFrame([pl.Series(c, v, dtype=types[t]) for c, (v, t) in columns.items()])
        out, _ = privatize_frame(df, column="v", mechanism=mechanism, keep=others)
        assert out.schema == df.schema and out.select(others).equals(df.select(others))
        released = out["v"].to_list()
    else:
        types = {"int": "int64", "text": "str", "float": "float64"}
        df = pd.DataFrame({c: pd.Series(v, dtype=types[t]) for c, (v, t) in columns.items()})
        df.index = pd.Index([f"r{i}" for i in range(n)], name="key")
        out, _ = privatize_frame(df, column="v", mechanism=mechanism, keep=["key", *others])
        pd.testing.assert_frame_equal(out[others], df[others])
        assert out.index.equals(df.index) and out.dtypes.equals(df.dtypes)
        released = out["v"].tolist()
    assert len(released) == n
    assert {_text(x) for x in released} <= outputs
