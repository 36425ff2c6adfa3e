"""1-Diffractor's lists on disk: read back identical, rebuilt when a file is not to be trusted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricdp.pointspace import PointSpace
from metricdp.text import diffractor, disk_cache
from metricdp.text.diffractor import DiffractorText

POINTS = np.random.default_rng(8).normal(size=(45, 3))


def _space() -> PointSpace:
    return PointSpace.from_points(POINTS)  # a new object: nothing shared in memory


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    build = diffractor._build_lists

    def counted(space, starts):
        calls.append(len(starts))
        return build(space, starts)

    monkeypatch.setattr(diffractor, "_build_lists", counted)
    return calls


def test_a_warm_cache_gives_the_same_lists_and_releases(tmp_path: Path, builds: list[int]) -> None:
    cold = DiffractorText(_space(), 1.0, lists=2, cache_dir=tmp_path)
    warm = DiffractorText(_space(), 0.5, lists=2, cache_dir=tmp_path)  # the lists do not depend on eps
    assert builds == [2] and np.array_equal(warm.lists, cold.lists)
    DiffractorText(_space(), 0.5, lists=3, cache_dir=tmp_path)
    assert builds == [2, 3] and len(list(tmp_path.glob("diffractor-lists-*.npz"))) == 2
    inputs = np.arange(45).repeat(10)
    assert np.array_equal(DiffractorText(_space(), 1.0, lists=2, cache_dir=tmp_path).sample(inputs, rng=3),
                          cold.sample(inputs, rng=3))


def test_damaged_or_forged_lists_are_rebuilt(tmp_path: Path, builds: list[int]) -> None:
    cold = DiffractorText(_space(), 1.0, cache_dir=tmp_path)
    (path,) = tmp_path.glob("diffractor-lists-*.npz")
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    assert np.array_equal(DiffractorText(_space(), 1.0, cache_dir=tmp_path).lists, cold.lists)
    assert builds == [1, 1]
    with np.load(path) as f:
        key = f["key"].tobytes()
    forged = {"lists": np.zeros((1, 45), dtype=np.int64)}  # every position the same word: not a permutation
    checksum = disk_cache._checksum(key, forged).encode("ascii")
    with path.open("wb") as fh:
        np.savez(fh, key=np.frombuffer(key, np.uint8), checksum=np.frombuffer(checksum, np.uint8), **forged)
    assert np.array_equal(DiffractorText(_space(), 1.0, cache_dir=tmp_path).lists, cold.lists)
    assert builds == [1, 1, 1]


def test_lists_built_in_memory_are_stored_when_a_cache_is_named(tmp_path: Path, builds: list[int]) -> None:
    space = _space()
    DiffractorText(space, 1.0)
    DiffractorText(space, 1.0, cache_dir=tmp_path)
    assert builds == [1] and len(list(tmp_path.glob("diffractor-lists-*.npz"))) == 1
    assert np.array_equal(DiffractorText(_space(), 1.0, cache_dir=tmp_path).lists, DiffractorText(space, 1.0).lists)
    assert builds == [1]
