"""Dask: map_partitions on a local cluster, the mechanism shipped once, seeded partitions spawned."""

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

dd = import_or_skip("dask.dataframe", "dask")
distributed = import_or_skip("distributed", "dask")
pd = import_or_skip("pandas", "dask")

from metricdp.integrations.dask import privatize_dask  # noqa: E402

pytestmark = pytest.mark.slow  # CI runs it in the full phase (.ci/full)

LABELS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def mech():
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS)
    m = np.exp(-1.0 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 1.0, "exponential")


def test_graph_holds_the_mechanism_once(mech):
    df = dd.from_pandas(pd.DataFrame({"w": LABELS * 10}), npartitions=5)
    graph = dict(privatize_dask(df, "w", mech).__dask_graph__())
    assert sum(1 for k in graph if "Shipped" in str(k)) == 1  # one node, not one copy per partition


def test_seeded_partitions_differ_and_replay(mech):
    df = dd.from_pandas(pd.DataFrame({"w": ["b"] * 400}), npartitions=2)
    with pytest.warns(PrivacyLeakWarning):
        a = privatize_dask(df, "w", mech, seed=4).compute(scheduler="sync")["w"].tolist()
    with pytest.warns(PrivacyLeakWarning):
        b = privatize_dask(df, "w", mech, seed=4).compute(scheduler="sync")["w"].tolist()
    assert a == b  # reproducible with a seed
    assert a[:200] != a[200:]  # but the two partitions do not share a stream


def test_local_cluster_end_to_end(mech, scheduler):
    """Real worker processes: the mechanism is pickled, shipped and used there."""
    n = 3000
    pdf = pd.DataFrame({"id": np.arange(n), "w": ["c"] * n, "note": ["x,y"] * n})
    with distributed.Client(scheduler), pytest.warns(PrivacyLeakWarning, match="seed 3"):  # a fixed draw
        out = privatize_dask(dd.from_pandas(pdf, npartitions=4), "w", mech, seed=3, keep=["id", "note"]).compute()
    assert out["id"].tolist() == list(range(n)) and (out["note"] == "x,y").all()
    counts = out["w"].value_counts().reindex(LABELS, fill_value=0).to_numpy()
    from scipy import stats

    assert stats.chisquare(counts, np.asarray(mech.matrix)[2] * n).pvalue > 0.001


def test_what_leaves_is_decided_before_the_frame_is_returned(mech, scheduler):
    """As the pandas API: a column revealing the released one is refused (nothing returned, so nothing
    written), unless kept on purpose; an unnamed column is named in a warning; a dropped one leaves."""
    n = 3000
    pdf = pd.DataFrame({"w": [LABELS[i % 3] for i in range(n)], "note": [f"n{i % 5}" for i in range(n)]})
    pdf["copy"] = pdf["w"].str.upper()
    df = dd.from_pandas(pdf, npartitions=3)
    with distributed.Client(scheduler):
        with pytest.raises(ValidationError, match=r"^DataFrame: column 'copy' holds the released column's true "
                                                  r"values \('w'\) in 512 of 512 compared rows, first at row 1 "
                                                  r"\(partition 0\)"):
            privatize_dask(df, "w", mech, keep=["note"])
        with pytest.warns(UnnamedColumnsWarning, match=r"'note' leave with their TRUE values"):
            out = privatize_dask(df, "w", mech, keep=["copy"]).compute()
        assert list(out.columns) == ["w", "note", "copy"] and out["copy"].tolist() == pdf["copy"].tolist()
        out = privatize_dask(df, "w", mech, keep=["note"], drop=["copy"]).compute()
        assert list(out.columns) == ["w", "note"] and len(out) == n
        with pytest.raises(ValidationError, match="no column 'x' to be kept"):
            privatize_dask(df, "w", mech, keep=["x"])


def test_cli_engine_dask_csv_and_parquet(mech, tmp_path, scheduler):
    mech.save(tmp_path / "m.npz")
    rows = [["id", "w", "note"]] + [[str(i), LABELS[i % 3], f'n "{i}", ok'] for i in range(500)]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    (tmp_path / "in.csv").write_text(buf.getvalue())
    result = run("privatize", tmp_path / "m.npz", tmp_path / "in.csv", "-c", "w", "-o", tmp_path / "out.csv",
                 "--engine", "dask", "--scheduler", scheduler, "--seed", 3)
    assert result.exit_code == 0, result.output
    assert "dask engine" in result.stdout and "not private" in result.stderr
    got = list(csv.reader(io.StringIO((tmp_path / "out.csv").read_text(), newline="")))
    assert got[0] == rows[0] and [r[::2] for r in got] == [r[::2] for r in rows]
    assert all(r[1] in LABELS for r in got[1:])
    pdf = pd.DataFrame({"id": np.arange(300), "w": pd.array(["a"] * 300, dtype="string")})
    pdf.to_parquet(tmp_path / "in.parquet")
    result = run("privatize", tmp_path / "m.npz", tmp_path / "in.parquet", "-c", "w", "-o", tmp_path / "o.parquet",
                 "--engine", "dask")  # no --scheduler: a local cluster of its own
    assert result.exit_code == 0, result.output
    back = pd.read_parquet(tmp_path / "o.parquet")
    assert back["id"].tolist() == list(range(300)) and set(back["w"]) <= set(LABELS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "in.parquet", "m.npz", "o.parquet", "out.csv"]


def test_cli_engine_dask_unknown_label_writes_nothing(mech, tmp_path, scheduler):
    mech.save(tmp_path / "m.npz")
    (tmp_path / "in.csv").write_text("w\na\nzz\n")
    result = run("privatize", tmp_path / "m.npz", tmp_path / "in.csv", "-c", "w", "-o", tmp_path / "out.csv",
                 "--engine", "dask", "--scheduler", scheduler)
    assert_one_line_error(result, "not in the space's labels", "'zz'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "m.npz"]
