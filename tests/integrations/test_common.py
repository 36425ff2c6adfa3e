"""One stream per partition: spawned children are numpy's, and two partitions are independent."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from scipy import stats

from metricdp import MetricSpace, PrivacyLeakWarning, ValidationError
from metricdp._random import SecureRandom
from metricdp.integrations import partition_rng
from metricdp.integrations._common import Shipped, check_seed, release_column
from metricdp.mechanisms.base import certify
from tests.helpers import needs

LABELS = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def mech():
    space = MetricSpace.from_points([[0.0], [1.0], [2.0], [3.0]], LABELS)
    m = np.exp(-0.5 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.5, "exponential")


def test_seeded_partition_streams_are_seedsequence_children():
    children = np.random.SeedSequence(11).spawn(3)
    for k in range(3):
        expected = np.random.default_rng(children[k]).random(5)
        np.testing.assert_array_equal(partition_rng(11, k).random(5), expected)
    assert not np.array_equal(partition_rng(11, 0).random(5), partition_rng(11, 1).random(5))


def test_default_is_the_secure_source():
    assert isinstance(partition_rng(None, 0), SecureRandom)


def _contingency_pvalue(x: np.ndarray, y: np.ndarray) -> float:
    table = np.zeros((len(LABELS), len(LABELS)))
    np.add.at(table, (x, y), 1)
    return float(stats.chi2_contingency(table).pvalue)


@pytest.mark.parametrize("seed", [None, 3])
@needs("pandas")  # a partition is a pandas DataFrame
def test_two_partitions_release_streams_are_independent(mech, seed):
    import pandas as pd

    n = 20_000
    values = pd.Series(["b"] * n)
    with pytest.warns(PrivacyLeakWarning) if seed is not None else contextlib.nullcontext():
        s = check_seed(seed)
    x = release_column(values, mech, partition_rng(s, 0), "p0")
    y = release_column(values, mech, partition_rng(s, 1), "p1")
    xi, yi = (pd.Index(LABELS).get_indexer(v) for v in (x, y))
    alpha = 1e-9 if seed is None else 1e-3  # the OS source: a false alarm at most 1e-9 a run; a seed: a fixed draw
    assert _contingency_pvalue(xi, yi) > alpha  # row k of partition 0 says nothing about row k of partition 1
    p = np.asarray(mech.matrix)[1]
    for z in (xi, yi):
        assert stats.chisquare(np.bincount(z, minlength=4), p * n).pvalue > alpha
    # a shared stream would give identical releases: the dependence test has power
    same = release_column(values, mech, partition_rng(7, 0), "p")
    again = release_column(values, mech, partition_rng(7, 0), "p")
    ai, bi = (pd.Index(LABELS).get_indexer(v) for v in (same, again))
    assert _contingency_pvalue(ai, bi) < 1e-10


@needs("pandas")  # a partition is a pandas DataFrame
def test_release_column_names_unknown_rows(mech):
    import pandas as pd

    with pytest.raises(ValidationError, match=r"p3: 2 value\(s\) not in the space's labels \(first at row\(s\) 2, 4"):
        release_column(pd.Series(["a", "zz", "b", None]), mech, SecureRandom(), "p3")


def test_check_seed_refuses_bad_seeds():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValidationError, match="seed must be None or an int"):
            check_seed(bad)


def test_shipped_mechanism_pickles_to_the_same_mechanism(mech):
    import pickle

    back = pickle.loads(pickle.dumps(Shipped(mech))).mechanism
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    assert back.labels == mech.labels and back.epsilon == mech.epsilon and dict(back.params) == dict(mech.params)


@needs("pandas")  # a partition is a pandas DataFrame
def test_a_rectangular_mechanism_releases_its_output_labels():
    import pandas as pd

    from metricdp.outputs import OutputSet

    space = MetricSpace.from_points([[0.0], [1.0], [2.0], [3.0]], LABELS)
    hubs = OutputSet.from_points(space, [[0.5], [2.5]], ["west", "east"])
    m = np.array([[0.6, 0.4], [0.55, 0.45], [0.45, 0.55], [0.4, 0.6]])
    rect = certify(m, space, 1.0, "custom", outputs=hubs)
    values = pd.Series(["a"] * 5000 + ["d"] * 5000)
    out = np.asarray(release_column(values, rect, np.random.default_rng(0), "p0"))
    assert set(out) == {"west", "east"}
    counts = np.array([(out[:5000] == "west").sum(), (out[:5000] == "east").sum()])
    assert stats.chisquare(counts, m[0] * 5000).pvalue > 0.001
