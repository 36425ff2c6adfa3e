"""Numbers, case and Unicode forms through every text mechanism of the registry, on a small vocabulary.

Whatever the mechanism: a number is never released as a word nor a word as a number (or
punctuation) under the default output policies; a released word takes the input's case
pattern (lower, Title, UPPER; mixed case gives the vocabulary's spelling); a word hidden
behind format characters or compatibility forms is looked up by its normal form, released,
and written without the characters that hid it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from metricdp.mechanisms import registry
from metricdp.pointspace import PointSpace
from metricdp.text.build import build
from metricdp.text.numbers import NumberRelease
from metricdp.text.policy import OutputFilter, alphabetic_mask, word_mask
from metricdp.text.rewrite import RewriteStats, Vocabulary, rewrite_texts
from metricdp.text.tokens import case_pattern, is_numeric, normal, parse_number, split

LABELS = ["paris", "london", "city", "the", "version", "january", "year", "powerpc", "house", "tree", "blue",
          "red", "run", "fine", "1990", "2004", ",", ".", "--", "2", "0"]
#: Parameters that fit a 20-word vocabulary (CusText's output sets, at most n words).
PARAMS: dict[str, dict[str, object]] = {"custext": {"size": 5}}
TEXT = ("Version 2.0, January 2004: PARIS and Paris and paris, PowerPC, par\u200bis, pa\u00adris, "
        "\uff50\uff41\uff52\uff49\uff53 and \uff30\uff41\uff52\uff49\uff53, \ufb01ne. 1,250.50 -3 3rd +7")
HIDDEN = ("\u200b", "\u00ad", "\uff50", "\uff30", "\ufb01")  # format characters, width and ligature forms (NFKC)


@pytest.fixture(scope="module")
def space() -> PointSpace:
    rng = np.random.default_rng(0)
    return PointSpace.from_points(rng.normal(size=(len(LABELS), 3)), LABELS)


def _sampler(name: str, space: PointSpace, outputs: str, seed: int = 0):  # type: ignore[no-untyped-def]
    mech = build(name, space, 0.5, **PARAMS.get(name, {}))  # a small eps: most releases move
    allowed = alphabetic_mask(space.labels) if outputs == "alphabetic" else word_mask(space.labels)
    restrict = OutputFilter(space, allowed)
    rng = np.random.default_rng(seed)
    return lambda idx: restrict(mech.sample(idx, rng=rng))


def _words(text: str) -> list[str]:
    return [p for p, is_word in split(text) if is_word]


@pytest.mark.parametrize("outputs", ["alphabetic", "words"])
@pytest.mark.parametrize("name", registry.sampler_names())
def test_numbers_case_and_hidden_forms(name: str, outputs: str, space: PointSpace) -> None:
    st = RewriteStats()
    (out,) = rewrite_texts([TEXT], Vocabulary(LABELS), _sampler(name, space, outputs), stats=st)
    ins, outs = _words(TEXT), _words(out)
    assert len(ins) == len(outs)
    for before, after in zip(ins, outs, strict=True):
        if is_numeric(before) or before == "3rd":  # numbers (and tokens with a digit) are kept by default
            assert after == before
            continue
        if normal(before) not in LABELS:  # out of vocabulary: kept
            assert after == before
            continue
        assert not is_numeric(after), (before, after)  # never a number for a word
        assert re.fullmatch(r"[^\W\d_]+", after), (before, after)  # nor punctuation
        assert not any(h in after for h in HIDDEN)  # the characters that hid the word are not written
        label = normal(after)
        assert label in LABELS
        pattern = case_pattern(before)
        assert after == {"upper": label.upper(), "title": label.title(), "lower": label}.get(pattern, label)
    assert st.kept_by == {"numbers": 6} and st.normalised == 5 and st.oov == 3  # "and" x 3
    assert not any(h in out for h in HIDDEN)
    assert out.count(",") >= TEXT.count(",") - 1  # the layout's punctuation stays ("1,250.50" kept whole)


@pytest.mark.parametrize("name", registry.sampler_names())
def test_numbers_released_as_numbers_in_their_shape(name: str, space: PointSpace) -> None:
    st = RewriteStats()
    (out,) = rewrite_texts([TEXT], Vocabulary(LABELS), _sampler(name, space, "alphabetic"), stats=st,
                           numbers=NumberRelease(0.05, rng=1))
    for before, after in zip(_words(TEXT), _words(out), strict=True):
        if parse_number(before) is not None:
            assert parse_number(after) is not None and parse_number(after)[1] == parse_number(before)[1]
            assert ("," in after) == ("," in before) or abs(parse_number(after)[0]) < 100_000
        elif is_numeric(before) or before == "3rd":
            assert after == before  # "2.0" is 2 then 0 only when not a number; "3rd" kept by default
        else:
            assert not is_numeric(after)
    assert st.numbers == 5 and st.kept_by.get("numbers", 0) == 1  # 2.0 2004 1,250.50 -3 +7; 3rd kept
    assert st.numbers_per_document == {5: 1} and st.max_numbers_per_document == 5


EXTREMES = (1e308, 1e-308, 5e-324)


def _extreme_cases() -> list[tuple[str, float, dict[str, object]]]:
    """Every family at extreme epsilons, and every declared float parameter at extreme values."""
    cases = []
    for name, family in registry.SAMPLER_FAMILIES.items():
        base = dict(PARAMS.get(name, {}))
        cases += [(name, eps, base) for eps in EXTREMES]
        for param in family.params:
            if param.kind == "float":
                cases += [(name, eps, {**base, param.name: value}) for eps in (1.0, 1e-308)
                          for value in (1e308, 1e-308, 0.0, 1.0 - 1e-16)]
    return cases


@pytest.mark.parametrize(("name", "eps", "params"), _extreme_cases())
def test_extreme_parameters_release_or_raise_one_typed_error(name: str, eps: float, params: dict[str, object],
                                                             space: PointSpace) -> None:
    """No OverflowError, ZeroDivisionError or hang: a release over the vocabulary, or a library error."""
    from metricdp.errors import MetricDPError

    try:
        mech = build(name, space, eps, **params)
        out = mech.sample(np.arange(space.n), rng=np.random.default_rng(0))
    except MetricDPError as ex:
        assert str(ex) and "\n" not in str(ex)
        return
    assert out.shape == (space.n,) and ((out >= 0) & (out < space.n)).all()


def test_tem_gamma_beyond_the_clamp_is_the_law_at_the_clamp(space: PointSpace) -> None:
    """Weights are clamped at distance 2C/eps, so gamma = 1e308 gives the very law of gamma = 2C/eps."""
    from metricdp.sampling import DISTANCE_EXPONENT_CAP

    eps = 1.0
    huge = build("tem", space, eps, gamma=1e308)
    clamp = build("tem", space, eps, gamma=2 * DISTANCE_EXPONENT_CAP / eps)
    words = np.arange(space.n)
    a = huge.sample(np.repeat(words, 50), rng=np.random.default_rng(5))
    b = clamp.sample(np.repeat(words, 50), rng=np.random.default_rng(5))
    assert huge.radius == clamp.radius and (a == b).all()
