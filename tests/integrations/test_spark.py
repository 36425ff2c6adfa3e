"""Spark: mapInPandas in local mode, the mechanism broadcast once, through the library and the CLI."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from metricdp import MetricSpace, PrivacyLeakWarning
from metricdp.errors import UnnamedColumnsWarning, ValidationError
from metricdp.mechanisms.base import certify
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import import_or_skip
from tests.integrations.conftest import spark_unavailable

if spark_unavailable:
    pytest.skip(spark_unavailable, allow_module_level=True)
pd = import_or_skip("pandas", "pandas")

from metricdp.integrations.spark import privatize_spark  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # CI runs it in the full phase (.ci/full)
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

LABELS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def mech():
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS)
    m = np.exp(-1.0 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 1.0, "exponential")


def test_local_mode_releases_and_seeded_partitions(spark, mech):
    n = 2000
    df = spark.createDataFrame(pd.DataFrame({"id": np.arange(n), "w": ["a"] * n}))  # local[2]: two partitions
    with pytest.warns(PrivacyLeakWarning):
        released = privatize_spark(df, "w", mech, seed=8, keep=["id"])
    a = sorted((r["id"], r["w"]) for r in released.collect())
    b = sorted((r["id"], r["w"]) for r in released.collect())
    assert a == b  # seeded: every action replays the same streams
    assert [i for i, _ in a] == list(range(n)) and {w for _, w in a} <= set(LABELS)
    from scipy import stats

    counts = np.array([sum(w == x for _, w in a) for x in LABELS])
    assert stats.chisquare(counts, np.asarray(mech.matrix)[0] * n).pvalue > 0.001


def _frame(df):
    """A Spark frame's rows as pandas (collect: toPandas warns under pandas 3)."""
    return pd.DataFrame.from_records([tuple(r) for r in df.collect()], columns=df.columns)


def test_what_leaves_is_decided_before_the_frame_is_returned(spark, mech):
    """As the pandas API: a column revealing the released one is refused (nothing returned, so nothing
    written), unless kept on purpose; an unnamed column is named in a warning; a dropped one leaves."""
    n = 3000
    pdf = pd.DataFrame({"w": [LABELS[i % 3] for i in range(n)], "note": [f"n{i % 5}" for i in range(n)]})
    pdf["copy"] = pdf["w"].str.upper()
    df = spark.createDataFrame(pdf)
    with pytest.raises(ValidationError, match=r"^DataFrame: column 'copy' holds the released column's true "
                                              r"values \('w'\) in 512 of 512 compared rows, first at row 1 "
                                              r"\(partition 0\)"):
        privatize_spark(df, "w", mech, keep=["note"])
    with pytest.warns(UnnamedColumnsWarning, match=r"'note' leave with their TRUE values"):
        out = _frame(privatize_spark(df, "w", mech, keep=["copy"]))
    assert list(out.columns) == ["w", "note", "copy"] and sorted(out["copy"]) == sorted(pdf["copy"])
    out = _frame(privatize_spark(df, "w", mech, keep=["note"], drop=["copy"]))
    assert list(out.columns) == ["w", "note"] and len(out) == n


def test_cli_engine_spark_csv_parquet_and_unknown(spark, mech, tmp_path):
    mech.save(tmp_path / "m.npz")
    rows = [["id", "w", "note"]] + [[str(i), LABELS[i % 3], f'n "{i}", ok'] for i in range(300)]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    (tmp_path / "in.csv").write_text(buf.getvalue())
    result = run("privatize", tmp_path / "m.npz", tmp_path / "in.csv", "-c", "w", "-o", tmp_path / "out.csv",
                 "--engine", "spark")
    assert result.exit_code == 0, result.output
    got = list(csv.reader(io.StringIO((tmp_path / "out.csv").read_text(), newline="")))
    assert got[0] == rows[0] and [r[::2] for r in got] == [r[::2] for r in rows]
    assert all(r[1] in LABELS for r in got[1:])
    pd.DataFrame({"id": np.arange(200), "w": ["b"] * 200}).to_parquet(tmp_path / "in.parquet")
    result = run("privatize", tmp_path / "m.npz", tmp_path / "in.parquet", "-c", "w", "-o", tmp_path / "o.parquet",
                 "--engine", "spark")
    assert result.exit_code == 0, result.output
    back = pd.read_parquet(tmp_path / "o.parquet")
    assert back["id"].tolist() == list(range(200)) and set(back["w"]) <= set(LABELS)
    (tmp_path / "bad.csv").write_text("w\na\nzz\n")
    result = run("privatize", tmp_path / "m.npz", tmp_path / "bad.csv", "-c", "w", "-o", tmp_path / "x.csv",
                 "--engine", "spark")
    assert_one_line_error(result, "not in the space's labels", "zz")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.csv", "in.csv", "in.parquet", "m.npz", "o.parquet", "out.csv"
    ]
