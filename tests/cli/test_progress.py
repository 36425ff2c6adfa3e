"""The CLI's progress(): the library's one reporter, silent in pipes, a rich bar on a terminal."""

from __future__ import annotations

import io

from metricdp._progress import ProgressReporter
from metricdp.cli import _common


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_yields_the_library_reporter() -> None:
    with _common.progress("work", 3) as report:
        assert isinstance(report, ProgressReporter) and report.label == "work"


def test_pipe_prints_nothing_even_for_long_work(capsys) -> None:
    # the old pipe renderer printed "[elapsed] message (done/total)" every 10 s; progress is
    # now one reporter, which never writes to a stream that is not a terminal (--json stays clean)
    with _common.progress("work", 3) as report:
        report.interval = 0.0
        report.start -= 3600.0
        report(1, 3, "round 1: 40 rows")
        report(2, None, "round 2: 55 rows")
        report.update("saving")
    assert capsys.readouterr().err == "" and report.lines == 0


def test_terminal_bar_shows_the_reporters_lines(monkeypatch) -> None:
    from rich.progress import Progress

    shown: list[tuple[str, int | None, int | None]] = []
    update = Progress.update

    def record(self, task, **kwargs):  # type: ignore[no-untyped-def]
        shown.append((kwargs.get("description"), kwargs.get("completed"), kwargs.get("total")))
        return update(self, task, **kwargs)

    monkeypatch.setattr(Progress, "update", record)
    monkeypatch.setattr(_common.err_console, "_file", Tty())  # restored to None: follow sys.stderr
    with _common.progress("building constopt on 8 points", unit="LPs") as report:
        report(3, 4, "round 3: 1,204 rows")
        report.update("saving m.npz")
    assert [s[1:] for s in shown] == [(3, 4), (3, 4)]
    first, second = shown[0][0], shown[1][0]
    assert first.startswith("building constopt on 8 points: 3 of 4 LPs (75%), ")
    assert first.endswith(" left (round 3: 1,204 rows)")
    assert second.endswith("(saving m.npz)") and "3 of 4 LPs" in second
