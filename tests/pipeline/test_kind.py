"""What the kinds of one coded column share (:class:`metricdp.pipeline.kind.CodedColumn`): labels and numbers."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp import MetricSpace, ValidationError
from metricdp.mechanisms.base import certify
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.pipeline.kind import CodedColumn
from metricdp.pipeline.labels import Labels
from metricdp.pipeline.numbers import Numbers, check_choices
from metricdp.tabular.formats import Coded


def _labels():
    space = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
    m = np.exp(-0.8 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.8, "exponential")


def test_labels_and_numbers_are_one_coded_column():
    ages = number_mechanism(NumericGrid(0, 2, 1), 0.25)
    for kind, eps, outputs, what in ((Labels(_labels(), "c", None), 0.8, ("a", "b"), "the mechanism's labels"),
                                     (Numbers(ages, "n", None), 0.25, tuple(ages.output_labels),
                                      "the released grid points")):
        assert isinstance(kind, CodedColumn) and kind.epsilon == eps and kind.outputs == outputs
        assert kind.columns == (kind.column,) and kind.parse_empty().shape == (0,)
        (released,) = kind.render(np.array([1, 0], dtype=np.intp))
        assert isinstance(released, Coded) and released.outputs == outputs and released.what == what


def test_the_numbers_choices_name_the_parameter():
    check_choices("clamp", "round")
    with pytest.raises(ValidationError, match=r"^the parameter 'out_of_range' must be one of error, clamp, got 'x'"):
        check_choices("x", "round")
    with pytest.raises(ValidationError, match=r"^the parameter 'off_grid' must be one of error, round, got 'up'"):
        check_choices("error", "up")
