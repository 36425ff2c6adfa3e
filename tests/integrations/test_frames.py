"""The distributed frames' sample (:mod:`metricdp.integrations._frames`): the pandas API's compared rows.

Oracle: the rows :func:`metricdp.frames.privatize_frame` compares -- blocks of
:data:`~metricdp.tabular.leaks.SCAN_ROWS` rows from the frame's first row, each on
:func:`~metricdp.tabular.leaks.spread` of its rows -- written out here from the two
constants, whatever the partitions' boundaries.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.integrations._frames import compared_rows, sample_blocks
from metricdp.tabular.leaks import SAMPLE, SCAN_ROWS, spread


def _pandas_api(n: int) -> tuple[list[int], list[int]]:
    rows = [start + i for start in range(0, n, SCAN_ROWS) for i in spread(min(n - start, SCAN_ROWS))]
    return rows, [r - r % SCAN_ROWS for r in rows]


def test_a_small_frame_is_compared_in_every_row_whatever_its_partitions() -> None:
    assert compared_rows(300, 100, 200) == (list(range(100, 200)), [0] * 100)
    assert compared_rows(300, 0, 0) == ([], [])
    assert compared_rows(0, 0, 5) == ([], [])


def test_a_partition_across_a_block_boundary_takes_both_blocks_rows() -> None:
    n = 2 * SCAN_ROWS
    rows, blocks = compared_rows(n, SCAN_ROWS - 1, SCAN_ROWS + 1)
    assert rows == [SCAN_ROWS - 1, SCAN_ROWS]  # the last row of block 0, the first of block 1: both compared
    assert blocks == [0, SCAN_ROWS]


@given(n=st.integers(0, 3 * SCAN_ROWS + 7), cuts=st.lists(st.floats(0, 1), max_size=6))
def test_the_partitions_picks_together_are_the_pandas_apis(n: int, cuts: list[float]) -> None:
    bounds = sorted({0, n, *(int(c * n) for c in cuts)})
    rows: list[int] = []
    blocks: list[int] = []
    for start, stop in itertools.pairwise(bounds):
        got = compared_rows(n, start, stop)
        rows += got[0]
        blocks += got[1]
    assert (rows, blocks) == _pandas_api(n)
    assert len(rows) == sum(min(SAMPLE, min(n - s, SCAN_ROWS)) for s in range(0, n, SCAN_ROWS))


def test_sample_blocks_names_rows_by_their_place_in_the_frame() -> None:
    pd = pytest.importorskip("pandas")
    n = SCAN_ROWS + 100
    part = pd.DataFrame({"w": np.arange(SCAN_ROWS - 10, n)})  # a partition from row SCAN_ROWS - 10 (0-based)
    got = sample_blocks(part, "3", SCAN_ROWS - 10, n, "block", "place")
    rows, blocks = compared_rows(n, SCAN_ROWS - 10, n)
    assert got["w"].tolist() == rows  # the values are the rows' positions: the right rows were picked
    assert got["block"].tolist() == blocks
    assert got["place"].tolist()[-1] == f"{n} (partition 3)"
    assert set(got["block"]) == {0, SCAN_ROWS}
