"""One randomness rule: every releasing entry point asks
:func:`metricdp._random.warn_unless_secure`, which warns with one message."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import metricdp
from metricdp import MetricSpace, PrivacyLeakWarning
from metricdp._random import SecureRandom, check_release_rng, insecure_message, warn_unless_secure
from metricdp.integrations._common import check_seed
from metricdp.location.points import privatize_points
from metricdp.mechanisms import build
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file


class _Sub(SecureRandom):
    """A subclass may override the draws: it is not the OS secure source."""


@pytest.fixture(scope="module")
def mech():
    return build("exponential", MetricSpace.from_points([[0.0], [1.0]], ["a", "b"]), 1.0)


def _entry_points(mech, tmp_path: Path):
    src = tmp_path / "in.csv"
    src.write_text("w\na\nb\n")
    num = tmp_path / "num.csv"
    num.write_text("x\n0\n1\n")
    outs = iter(range(100))
    return {
        "check_release_rng": lambda rng: check_release_rng(rng),
        "Mechanism.privatize": lambda rng: mech.privatize(["a", "b"], rng),
        "privatize_points": lambda rng: privatize_points([[48.85, 2.35]], 1.0, rng=rng),
        "privatize_file": lambda rng: privatize_file(mech, src, "w", tmp_path / f"o{next(outs)}.csv", rng=rng),
        "privatize_numbers_file": lambda rng: privatize_numbers_file(
            number_mechanism(NumericGrid(0, 1, 1), 1.0), num, "x", tmp_path / f"o{next(outs)}.csv", rng=rng),
    }


@pytest.mark.parametrize("rng", [7, np.random.default_rng(1), np.random.SeedSequence(3), _Sub()],
                         ids=["int", "generator", "seedsequence", "subclass"])
def test_every_entry_point_warns_once_with_the_one_message(mech, tmp_path: Path, rng: object) -> None:
    for name, call in _entry_points(mech, tmp_path).items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(rng)
        leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
        assert [str(w.message) for w in leaks] == [insecure_message(rng)], name
        assert leaks[0].filename == __file__, (name, leaks[0].filename)  # points at the caller's line


def test_the_engines_seed_says_the_same(tmp_path: Path) -> None:
    with pytest.warns(PrivacyLeakWarning) as caught:
        assert check_seed(5) == 5
    assert [str(w.message) for w in caught] == [insecure_message(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_seed(None) is None


@pytest.mark.parametrize("rng", [None, SecureRandom()], ids=["default", "secure"])
def test_the_secure_source_is_silent(mech, tmp_path: Path, rng: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in _entry_points(mech, tmp_path).values():
            call(rng)
        assert warn_unless_secure(rng) is True
    with pytest.warns(PrivacyLeakWarning):
        assert warn_unless_secure(0) is False


def test_the_message_names_the_source_and_says_not_private() -> None:
    assert insecure_message(42).startswith("the seed 42 is not the OS secure source")
    assert "NOT private" in insecure_message(np.random.default_rng(0))
    assert "--" not in insecure_message(7)  # a library message names no CLI flag


def test_no_other_module_writes_its_own_warning() -> None:
    """The rule is stated once: no module but _random warns PrivacyLeakWarning itself.

    Another rule warns through its own subclass (``UnnamedColumnsWarning``: columns leaving unnamed).
    """
    src = Path(metricdp.__file__).parent
    pattern = re.compile(r"warnings\.warn\((?:(?!\)\n).)*PrivacyLeakWarning", re.S)
    own = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                 if pattern.search(p.read_text(encoding="utf-8")) and p.name != "_random.py")
    assert own == []
