"""The per-person report of a trace release."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.location.trace_report import PersonReport, TraceReport


def report() -> TraceReport:
    i = np.array
    return TraceReport(i(["a", "b"]), i([1_500_000_000_000, 250_000_000_000]), i([2, 1]), i([3, 0]), i([2, 0]),
                       i([1, 0]))


def test_person_reads_one_row_in_eps():
    assert report().person("a") == PersonReport("a", 1.5, 2, 3, 2, 1)
    assert report().person("b").eps_spent == 0.25
    assert report().eps_spent.tolist() == [1.5, 0.25] and len(report()) == 2


def test_absent_person_is_an_error():
    with pytest.raises(ValidationError, match="person 'c' is not in this report"):
        report().person("c")


def test_concat_keeps_the_order():
    both = TraceReport.concat([report(), report()])
    assert both.persons.tolist() == ["a", "b", "a", "b"] and both.fresh.tolist() == [2, 1, 2, 1]
    assert len(TraceReport.concat([])) == 0


def test_person_report_is_frozen():
    with pytest.raises(AttributeError):
        report().person("a").fresh = 5  # type: ignore[misc]
