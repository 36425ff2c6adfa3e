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



@pytest.mark.parametrize("suffix", [".feather", ".parquet"])
@pytest.mark.parametrize("values", [[["a"], ["b"]], [{"x": 1}, {"x": 2}]], ids=["list", "struct"])
def test_a_label_column_without_text_is_refused_naming_the_file_column_and_type(tmp_path, suffix, values) -> None:
    pa = pytest.importorskip("pyarrow")
    import re

    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    from metricdp.streaming.files import privatize_file

    src, out = tmp_path / f"in{suffix}", tmp_path / f"out{suffix}"
    table = pa.table({"id": [1, 2], "w": pa.array(values)})
    feather.write_feather(table, src) if suffix == ".feather" else pq.write_table(table, src)
    kind = (feather.read_table(src) if suffix == ".feather" else pq.read_table(src)).schema.field("w").type
    message = f"{src}: column 'w' has type {kind}; its values cannot be read as text"
    with pytest.raises(ValidationError, match="^" + re.escape(message) + "$"):
        privatize_file(_labels(), src, "w", out, keep=("id",))
    assert not out.exists()
