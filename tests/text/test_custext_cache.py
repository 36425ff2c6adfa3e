"""CusText's output sets and weights on disk: read back identical, rebuilt when a file is not to be trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.pointspace import PointSpace
from metricdp.text import custext, disk_cache
from metricdp.text.custext import CusTextText, custext_weights

POINTS = np.random.default_rng(3).normal(size=(57, 4))


def _space() -> PointSpace:
    """A new space object each time: nothing is shared in memory between two of them."""
    return PointSpace.from_points(POINTS, [f"w{i}" for i in range(len(POINTS))])


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the sets and the weights were computed."""
    count = {"sets": 0, "weights": 0}
    sets, weights = custext._build_sets, custext.custext_weights

    def counted_sets(*a, **k):
        count["sets"] += 1
        return sets(*a, **k)

    def counted_weights(*a, **k):
        count["weights"] += 1
        return weights(*a, **k)

    monkeypatch.setattr(custext, "_build_sets", counted_sets)
    monkeypatch.setattr(custext, "custext_weights", counted_weights)
    return count


def _entries(folder: Path, kind: str) -> list[Path]:
    return sorted(folder.glob(f"{kind}-*.npz"))


def test_a_warm_cache_gives_the_same_mechanism(tmp_path: Path, builds: dict[str, int]) -> None:
    cold = CusTextText(_space(), 1.5, size=5, cache_dir=tmp_path)
    assert builds == {"sets": 1, "weights": 1}
    assert len(_entries(tmp_path, "custext-sets")) == 1 and len(_entries(tmp_path, "custext-weights")) == 1
    warm = CusTextText(_space(), 1.5, size=5, cache_dir=tmp_path)
    assert builds == {"sets": 1, "weights": 1}  # nothing computed again
    assert np.array_equal(warm.group, cold.group) and np.array_equal(warm.members, cold.members)
    assert np.array_equal(warm.table.matrix, cold.table.matrix)
    assert np.array_equal(warm.table.prefix, cold.table.prefix)
    inputs = np.arange(57).repeat(20)
    assert np.array_equal(warm.sample(inputs, rng=9), cold.sample(inputs, rng=9))
    assert not [p for p in tmp_path.iterdir() if p.suffix != ".npz"]  # no temporary left behind


def test_one_entry_of_sets_per_size_and_of_weights_per_eps(tmp_path: Path, builds: dict[str, int]) -> None:
    for eps in (1.0, 2.0, 1.0):
        CusTextText(_space(), eps, size=5, cache_dir=tmp_path)
    assert builds == {"sets": 1, "weights": 2}
    assert len(_entries(tmp_path, "custext-sets")) == 1 and len(_entries(tmp_path, "custext-weights")) == 2
    CusTextText(_space(), 1.0, size=6, cache_dir=tmp_path)
    assert builds == {"sets": 2, "weights": 3}
    assert len(_entries(tmp_path, "custext-sets")) == 2 and len(_entries(tmp_path, "custext-weights")) == 3
    other = PointSpace.from_points(POINTS + 1.0, [f"w{i}" for i in range(len(POINTS))])  # a shifted copy
    assert disk_cache.vocabulary_fingerprint(other) != disk_cache.vocabulary_fingerprint(_space())


def test_a_changed_byte_is_rebuilt(tmp_path: Path, builds: dict[str, int]) -> None:
    cold = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    for path in (*_entries(tmp_path, "custext-sets"), *_entries(tmp_path, "custext-weights")):
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 3] ^= 0x10
        path.write_bytes(bytes(raw))
    warm = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    assert builds == {"sets": 2, "weights": 2}
    assert np.array_equal(warm.group, cold.group) and np.array_equal(warm.table.matrix, cold.table.matrix)
    CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    assert builds == {"sets": 2, "weights": 2}  # the rebuilt files replaced the damaged ones


def _forge(path: Path, **arrays: np.ndarray) -> None:
    """Rewrite an entry with other arrays and a checksum that matches them (what a forger can do)."""
    with np.load(path) as f:
        key = f["key"].tobytes()
    checksum = disk_cache._checksum(key, arrays).encode("ascii")
    with path.open("wb") as fh:
        np.savez(fh, key=np.frombuffer(key, np.uint8), checksum=np.frombuffer(checksum, np.uint8), **arrays)


def test_a_forged_partition_into_smaller_sets_is_not_used(tmp_path: Path, builds: dict[str, int]) -> None:
    cold = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    (sets,) = _entries(tmp_path, "custext-sets")
    _forge(sets, group=np.arange(57, dtype=np.int64))  # every word alone: it would be released as itself
    warm = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    assert builds["sets"] == 2 and np.array_equal(warm.group, cold.group)


def test_forged_weights_outside_the_proofs_range_are_not_used(tmp_path: Path, builds: dict[str, int]) -> None:
    cold = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    (path,) = _entries(tmp_path, "custext-weights")
    w, _ = custext_weights(_space(), cold.group, 1.0)
    w[w > 0] = np.where(w[w > 0] == 1.0, 1.0, 1e-9)  # the word itself almost surely: far beyond eps
    _forge(path, weights=w)
    warm = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    assert builds["weights"] == 2 and np.array_equal(warm.table.matrix, cold.table.matrix)


def test_another_vocabularys_entry_under_this_name_is_not_used(tmp_path: Path, builds: dict[str, int]) -> None:
    other = tmp_path / "other"
    other.mkdir()
    shifted = PointSpace.from_points(POINTS[::-1].copy(), [f"w{i}" for i in range(len(POINTS))])
    CusTextText(shifted, 1.0, size=5, cache_dir=other)
    cold = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    for kind in ("custext-sets", "custext-weights"):
        (mine,), (theirs,) = _entries(tmp_path, kind), _entries(other, kind)
        os.replace(theirs, mine)
        with np.load(mine) as f:
            assert json.loads(f["key"].tobytes())["vocabulary"] != disk_cache.vocabulary_fingerprint(_space())
    warm = CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    assert builds == {"sets": 3, "weights": 3}
    assert np.array_equal(warm.group, cold.group) and np.array_equal(warm.table.matrix, cold.table.matrix)


def test_a_missing_or_unwritable_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path / "absent")
    CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    (sets,) = _entries(tmp_path, "custext-sets")
    sets.unlink()
    sets.mkdir()  # the entry's name taken by a directory: not read, not written over
    with pytest.raises(ValidationError, match="directory"):
        CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path)
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ValidationError, match="cannot write the cache file"):
            CusTextText(_space(), 1.0, size=5, cache_dir=locked)
    finally:
        locked.chmod(0o700)


def test_sets_built_in_memory_are_stored_when_a_cache_is_named(tmp_path: Path, builds: dict[str, int]) -> None:
    space = _space()
    CusTextText(space, 1.0, size=5)
    assert _entries(tmp_path, "custext-sets") == []
    CusTextText(space, 1.0, size=5, cache_dir=tmp_path)  # the same space: its sets are in memory
    assert builds["sets"] == 1 and len(_entries(tmp_path, "custext-sets")) == 1
    assert np.array_equal(CusTextText(_space(), 1.0, size=5, cache_dir=tmp_path).group, custext.output_sets(space, 5))
    assert builds["sets"] == 1


def test_the_registry_passes_the_cache_dir_to_the_families_that_keep_one(tmp_path: Path, builds: dict[str, int]):
    from metricdp.text.build import build

    first = build("custext", _space(), 1.0, cache_dir=tmp_path, size=5)
    assert builds == {"sets": 1, "weights": 1} and len(os.listdir(tmp_path)) == 2
    again = build("custext", _space(), 1.0, cache_dir=tmp_path, size=5)  # read back, nothing computed
    assert builds == {"sets": 1, "weights": 1}
    np.testing.assert_array_equal(first.group, again.group)
    build("diffractor", _space(), 1.0, cache_dir=tmp_path)
    assert len(os.listdir(tmp_path)) == 3  # 1-Diffractor's lists
    build("exponential", _space(), 1.0, cache_dir=tmp_path)  # keeps nothing per vocabulary: ignored
    assert len(os.listdir(tmp_path)) == 3


def test_the_cache_dir_of_an_embeddings_file_is_beside_it_and_the_packaged_ones_in_the_users_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("a 1 0\nb 0 1\n", encoding="utf-8")
    assert disk_cache.cache_dir_for(vectors) == (tmp_path / "vectors.txt.metricdp-cache", None)
    assert (tmp_path / "vectors.txt.metricdp-cache").is_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk_cache.cache_dir_for("glove") == (tmp_path / "xdg" / "metricdp", None)
    (tmp_path / "file").write_text("", encoding="utf-8")  # a file where the directory would go: said, not raised
    where, why = disk_cache.cache_dir_for(tmp_path / "file" / "vectors.txt")
    assert where is None and "file" in (why or "")
