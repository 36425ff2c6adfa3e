"""Numbers released as numbers: the two-sided geometric law on each number's grid, and the number's shape."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.text.numbers import MAX_DIGITS, NumberRelease
from metricdp.text.tokens import format_number, parse_number


@pytest.mark.parametrize(("token", "parsed"), [
    ("2004", (2004, 0)), ("-3", (-3, 0)), ("+7", (7, 0)), ("1,250.50", (125050, 2)), ("0.5", (5, 1)),
    ("\u22122", (-2, 0)), ("\uff12\uff10", (20, 0)), ("3rd", None), ("1.2.3", None), ("12,34", None),
])
def test_parse_number_by_hand(token: str, parsed: tuple[int, int] | None) -> None:
    assert parse_number(token) == parsed


@pytest.mark.parametrize(("units", "decimals", "like", "text"), [
    (1999, 0, "2004", "1999"), (-1, 0, "2004", "-1"), (123456789, 2, "1,250.50", "1,234,567.89"),
    (5, 2, "0.10", "0.05"), (-5, 2, "0.10", "-0.05"), (7, 0, "+3", "+7"), (-7, 0, "+3", "-7"), (42, 0, "007", "042"),
])
def test_format_number_keeps_the_shape(units: int, decimals: int, like: str, text: str) -> None:
    assert format_number(units, decimals, like) == text


@settings(max_examples=200, deadline=None)
@given(units=st.integers(-10**12, 10**12), decimals=st.integers(0, 6), commas=st.booleans())
def test_format_then_parse_round_trips(units: int, decimals: int, commas: bool) -> None:
    like = ("1,000" if commas else "1000") + ("." + "0" * decimals if decimals else "")
    assert parse_number(format_number(units, decimals, like)) == (units, decimals)


def _offsets(token: str, eps: float, n: int, seed: int) -> np.ndarray:
    rel = NumberRelease(eps, rng=seed)
    units, _ = parse_number(token)  # type: ignore[misc]
    return np.array([parse_number(rel.release_token(token))[0] - units for _ in range(n)])  # type: ignore[index]


@pytest.mark.parametrize(("token", "eps"), [("2004", 0.7), ("2.50", 40.0)])
def test_release_follows_the_two_sided_geometric_law(token: str, eps: float) -> None:
    """Pr[Z = z] = (1 - b) / (1 + b) b^|z|, b = e^{-eps * step} (step 1 for 2004, 0.01 for 2.50): chi-square."""
    _, decimals = parse_number(token)  # type: ignore[misc]
    b = math.exp(-eps * 10.0**-decimals)
    z = _offsets(token, eps, 10_000, seed=3)
    support = np.arange(-8, 9)
    probs = (1 - b) / (1 + b) * b ** np.abs(support)
    observed = np.array([(z == k).sum() for k in support] + [(np.abs(z) > 8).sum()])
    expected = np.append(probs, 1 - probs.sum()) * len(z)
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_release_ratio_of_neighbours_is_within_eps() -> None:
    """The empirical e^eps ratio between 10 and 11 at one release value, within sampling error."""
    eps, n = 0.5, 15_000
    a = _offsets("10", eps, n, seed=1) + 10
    b = _offsets("11", eps, n, seed=2) + 11
    for y in (9, 10, 11, 12):
        ratio = (a == y).mean() / (b == y).mean()
        assert ratio < math.exp(eps) * 1.1 and ratio > math.exp(-eps) / 1.1


def test_release_keeps_separators_decimals_and_sign_shape() -> None:
    rel = NumberRelease(0.01, rng=0)  # large noise
    for token in ("1,250.50", "2004", "-3", "0.001"):
        out = rel.release_token(token)
        assert parse_number(out) is not None and parse_number(out)[1] == parse_number(token)[1]  # type: ignore[index]
    assert all("," in rel.release_token("1,250,000") or abs(parse_number(rel.release_token("1,250,000"))[0]) < 1000
               for _ in range(20))  # type: ignore[index]


def test_refusals_name_the_parameter() -> None:
    for bad in (0.0, -1.0, math.inf, math.nan, 1e-300):
        with pytest.raises(ValidationError, match="parameter 'epsilon'"):
            NumberRelease(bad)
    rel = NumberRelease(1.0, rng=0)
    assert not rel.releasable("3rd") and not rel.releasable("9" * (MAX_DIGITS + 1)) and rel.releasable("9" * 900)
    with pytest.raises(ValidationError, match="not a number token"):
        rel.release_token("3rd")
    assert repr(rel) == "NumberRelease(epsilon=1.0)"


def test_extreme_epsilons_release_without_overflow() -> None:
    assert NumberRelease(1e308, rng=0).release_token("12.5") == "12.5"  # Pr[Z != 0] underflows to 0
    out = NumberRelease(1e-100, rng=0).release_token("0.000001")
    assert parse_number(out) is not None


def test_hidden_and_fullwidth_numbers_are_released_in_ascii() -> None:
    rel = NumberRelease(1e6, rng=0)  # noise 0 with overwhelming probability
    assert rel.releasable("20\u200b04") and rel.release_token("20\u200b04") == "2004"
    assert rel.release_token("\uff12\uff10\uff10\uff14") == "2004"
