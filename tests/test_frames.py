"""DataFrames in and out (metricdp.frames): pandas, Polars, Series, the transformer."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import chisquare

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.frames import PrivatizeTransformer, privatize_frame, privatize_series
from metricdp.mechanisms.krr import krr
from metricdp.spaces import MetricSpace
from tests.helpers import import_or_skip

pd = import_or_skip("pandas", "pandas")

LABELS = ["1", "2", "3"]


@pytest.fixture
def mech():
    return krr(MetricSpace.grid(1, 3, labels=LABELS), ldp_epsilon=1.0)


def pandas_frame():
    idx = pd.Index(["r1", "r2", "r3", "r4"], name="key")
    return pd.DataFrame(
        {
            "id": [10, 11, 12, 13],
            "age": pd.array([1, 2, 3, 1], dtype="int32"),
            "city": pd.Categorical(["1", "2", "2", "3"]),
            "note": pd.array(["a", None, "c", "d"], dtype="string"),
            "flag": [True, False, True, True],
            "x": [0.5, 1.5, 2.5, 3.5],
        },
        index=idx,
    )


@pytest.mark.parametrize("column", ["age", "city"])
def test_pandas_round_trip_index_dtypes_columns(mech, column) -> None:
    df = pandas_frame()
    before = df.copy()
    with pytest.warns(PrivacyLeakWarning, match="'key'"):  # the index and the unnamed columns leave true
        out, plan = privatize_frame(df, column=column, mechanism=mech, keep=["id"], drop=["note"])
    pd.testing.assert_frame_equal(df, before)  # the input is untouched
    assert out.index.equals(df.index) and out.index.name == "key"
    assert list(out.columns) == [c for c in df.columns if c != "note"]
    assert out.dtypes.to_dict() == df.drop(columns="note").dtypes.to_dict()
    others = [c for c in out.columns if c != column]
    pd.testing.assert_frame_equal(out[others], df[others])
    assert set(out[column].astype(str)) <= set(LABELS)
    assert plan.released == (column,)
    assert plan.kept == ("id",) and plan.dropped == ("note",)
    assert set(plan.unreleased) == {"key", *others} and "id" not in plan.unacknowledged


def test_polars_round_trip(mech) -> None:
    pl = import_or_skip("polars", "polars")
    df = pl.DataFrame({"id": [1, 2, 3], "age": pl.Series([1, 2, 3], dtype=pl.Int16),
                       "city": pl.Series(["1", "2", "3"], dtype=pl.Categorical), "s": ["1", "1", "2"]})
    for column in ("age", "city", "s"):
        others = [c for c in ("age", "city", "s") if c != column]  # equal to the released labels: kept on purpose
        out, plan = privatize_frame(df, column=column, mechanism=mech, drop=["id"], keep=others)
        assert out.columns == ["age", "city", "s"]
        assert out.schema == df.drop("id").schema
        assert out.select(others).equals(df.select(others))
        assert set(out[column].cast(pl.String).to_list()) <= set(LABELS)
        assert plan.unreleased == tuple(others)
    series = privatize_series(df["s"], mech)
    assert series.name == "s" and series.len() == 3 and series.dtype == pl.String


def test_series_keeps_index_and_name(mech) -> None:
    s = pd.Series(["3", "1", "2"], index=pd.Index([7, 3, 9]), name="c")
    out = privatize_series(s, mech)
    assert out.index.tolist() == [7, 3, 9] and out.name == "c"


def test_release_follows_the_mechanism_law(mech) -> None:
    n = 6000
    df = pd.DataFrame({"v": ["1"] * n})
    with pytest.warns(PrivacyLeakWarning):
        out, _ = privatize_frame(df, column="v", mechanism=mech, rng=4)
    counts = out["v"].value_counts().reindex(LABELS, fill_value=0).to_numpy()
    assert chisquare(counts, n * mech.matrix[0]).pvalue > 1e-4


def test_unknown_values_refused_with_one_error(mech) -> None:
    df = pandas_frame().assign(age=[1, 9, 8, 9])
    with pytest.raises(ValidationError, match=r"column 'age'.*2 value\(s\).*'8', '9'"):
        privatize_frame(df, column="age", mechanism=mech)
    gap = pandas_frame().assign(note=pd.array(["2", None, "1", "2"], dtype="string"))
    with pytest.raises(ValidationError, match=r"'null' \(1 row\(s\); first at row\(s\) 'r2'\)"):
        privatize_frame(gap, column="note", mechanism=mech)
    with pytest.raises(ValidationError, match="no column 'agee'"):
        privatize_frame(pandas_frame(), column="agee", mechanism=mech)
    with pytest.raises(ValidationError, match="released"):
        privatize_frame(pandas_frame(), column="age", mechanism=mech, keep=["age"])
    with pytest.raises(ValidationError, match="DataFrame"):
        privatize_frame({"age": [1]}, column="age", mechanism=mech)


def test_secure_default_no_warning_and_seeded_warns(mech) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privatize_frame(pandas_frame(), column="age", mechanism=mech, keep=["key", "id", "city", "note", "flag", "x"])
        privatize_series(pd.Series(["1"]), mech)
    with pytest.warns(PrivacyLeakWarning):
        privatize_series(pd.Series(["1"]), mech, rng=np.random.default_rng(1))


def test_transformer_fit_reads_nothing(mech) -> None:
    class Exploding:
        def __getattr__(self, name):
            raise AssertionError(f"fit read the data ({name})")

        def __array__(self, *a, **k):
            raise AssertionError("fit read the data")

    t = PrivatizeTransformer(mech, column="age", keep=["key", "id", "city", "note", "flag", "x"])
    assert t.fit(Exploding()) is t
    out = t.transform(pandas_frame())
    assert out.index.equals(pandas_frame().index) and out["age"].dtype == "int32"
    arr = t.transform(np.array([["1"], ["3"]], dtype=object))
    assert arr.shape == (2, 1) and set(arr.ravel()) <= set(LABELS)
    assert t.get_params()["column"] == "age"
    assert t.set_params(column="city").column == "city"
    with pytest.raises(ValidationError):
        t.set_params(bogus=1)


def test_transformer_in_a_sklearn_pipeline(mech) -> None:
    sk = import_or_skip("sklearn.pipeline", "sklearn")
    from sklearn.base import clone

    pipe = sk.make_pipeline(PrivatizeTransformer(mech, column="age"))
    with pytest.warns(PrivacyLeakWarning, match="'id'"):
        out = pipe.fit_transform(pandas_frame())
    assert list(out.columns) == list(pandas_frame().columns)
    assert clone(PrivatizeTransformer(mech, column="age")).column == "age"
