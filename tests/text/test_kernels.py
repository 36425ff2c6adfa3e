"""The compiled table build of the exact exponential text sampler equals the numpy build bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp._readonly import is_frozen
from metricdp.pointspace import PointSpace
from metricdp.sampling import _fill_block_reference
from metricdp.text import exponential
from metricdp.text._kernels import KERNELS
from metricdp.text.exponential import ExponentialText, _fresh_frozen
from tests.helpers import needs

pytestmark = needs("fast")

_ENTRY = st.one_of(
    st.just(0.0),
    st.floats(min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.integers(-1074, 1000).map(lambda e: float(np.ldexp(1.0, e))),
)


@given(st.lists(_ENTRY, min_size=1, max_size=12), st.sampled_from([56, 12, 3]))
def test_fill_row_equals_the_integer_shift_reference(row, precision):
    # subnormals, 2**-1074, huge sums (sigma > 0 and beyond the safe scaling range), zeros
    p = np.array(row, dtype=np.float64)
    with np.errstate(over="ignore"):
        total = p.sum()
    if not np.isfinite(total):
        assert KERNELS["fill_row"](p, float(total), precision, np.zeros(len(p) + 1, np.uint64))[2] in (2, 3)
        return
    a = np.full(len(p) + 1, 7, dtype=np.uint64)
    b = np.zeros((1, len(p) + 1), dtype=np.uint64)
    sigma, cut, status = KERNELS["fill_row"](p, float(total), precision, a)
    s2, c2 = _fill_block_reference(p[None, :], b, precision)
    assert status == 0 and sigma == s2[0] and cut == c2[0] and np.array_equal(a, b[0])


def test_fill_row_refuses_negative_and_infinite_entries():
    prefix = np.zeros(3, np.uint64)
    assert KERNELS["fill_row"](np.array([1.0, -1.0]), 0.0, 56, prefix)[2] == 1
    assert KERNELS["fill_row"](np.array([1.0, np.inf]), np.inf, 56, prefix)[2] == 2


def _assert_same_tables(mech: ExponentialText, words: np.ndarray) -> None:
    fast = mech._make_compiled(words)
    ref = mech._make_reference(words)
    assert len(fast) == len(ref) == len(words)
    for (a, _), (b, _) in zip(fast, ref, strict=True):
        for name in ("matrix", "prefix", "scale", "truncated", "total", "limit"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert is_frozen(a.matrix) and is_frozen(a.prefix)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.1, 1.0, 10.0, 1e4]), st.integers(1, 9))
def test_compiled_tables_equal_the_numpy_tables_bit_for_bit(seed, eps, k):
    g = np.random.default_rng(seed)
    n = int(g.integers(2, 700))
    pts = g.normal(size=(n, 7)) * g.choice([0.01, 1.0, 100.0]) + 1e3  # offset: the centred vectors
    space = PointSpace.from_points(pts)
    words = g.choice(n, size=min(k, n), replace=False).astype(np.intp)
    _assert_same_tables(ExponentialText(space, eps), words)


def test_compiled_tables_over_many_tiles_on_glove_words(vocab, monkeypatch):
    _, points = vocab
    monkeypatch.setattr(exponential, "_TILE_ELEMENTS", 64)  # tiles of a few columns: every tile edge crossed
    _assert_same_tables(ExponentialText(points, 1.5), np.array([0, 17, 250, 299], dtype=np.intp))


def test_compiled_and_numpy_builds_release_the_same_words(vocab):
    _, points = vocab
    a, b = ExponentialText(points, 3.0), ExponentialText(points, 3.0)
    b._kernels = None
    inputs = np.repeat(np.arange(0, 300, 7), 5)
    assert np.array_equal(a.sample(inputs, rng=5), b.sample(inputs, rng=5))


def test_fresh_frozen_buffers_cannot_be_made_writable():
    alias, arr = _fresh_frozen((2, 3), np.float64)
    alias[:] = 1.5
    del alias
    assert is_frozen(arr) and arr.sum() == 9.0
    with pytest.raises(ValueError):
        arr.setflags(write=True)
