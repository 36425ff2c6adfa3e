"""Fixtures of the format tests: a label mechanism in memory and as a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._shared import labels_mechanism


@pytest.fixture(scope="module")
def mech() -> object:
    return labels_mechanism()


@pytest.fixture
def mech_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.npz"
    labels_mechanism().save(path)  # type: ignore[attr-defined]
    return path
