"""The CLI's one progress renderer: silent for short work in a pipe, a line per interval for long work."""

from __future__ import annotations

from metricdp.cli import _common


def test_pipe_prints_nothing_for_short_work(capsys) -> None:
    with _common.progress("work", 3) as report:
        report(1, 3, "step one")
        report.update("still going")
    assert capsys.readouterr().err == ""


def test_pipe_prints_one_line_per_interval(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_common, "PIPE_INTERVAL", 0.0)
    with _common.progress("work", 3) as report:
        report(1, 3, "round 1: 40 rows")
        report(2, None, "round 2: 55 rows")
        report.update("saving")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["round 1: 40 rows (1/3)", "round 2: 55 rows (2)", "saving"]
    assert all(line.startswith("[") and " s] " in line for line in lines)
