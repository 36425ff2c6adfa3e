"""metricdp._progress: the one reporter, driven by a fake clock and a fake terminal."""

from __future__ import annotations

import io

import pytest

from metricdp._progress import ProgressReporter, eta_seconds, report


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def make(stream: io.StringIO, total: int | None = None) -> tuple[ProgressReporter, Clock]:
    clock = Clock()
    return ProgressReporter("privatize x.csv", stream=stream, clock=clock, interval=2.0), clock


def test_one_line_per_interval_on_a_terminal():
    out = Tty()
    rep, clock = make(out)
    for step in range(1, 41):  # 40 ticks, 0.25 s apart: 10 s
        clock.t += 0.25
        rep(step * 25, None, "")
    lines = out.getvalue().splitlines()
    assert len(lines) == 5 == rep.lines  # at 2, 4, 6, 8, 10 s
    assert lines[0] == "privatize x.csv: 200 rows, 100 rows/s"


def test_nothing_before_the_first_interval():
    out = Tty()
    rep, clock = make(out)
    clock.t += 1.9
    rep(5, 10, "")
    assert out.getvalue() == ""


def test_no_output_when_not_a_terminal():
    out = io.StringIO()
    rep, clock = make(out)
    for step in range(50):
        clock.t += 1.0
        rep(step, 50, "")
    assert out.getvalue() == "" and rep.lines == 0


def test_eta_from_the_total():
    out = Tty()
    rep, clock = make(out)
    clock.t += 10.0
    rep(250, 1000, "part 3 of 8")
    # 25 rows/s; 750 rows left -> 30 s
    assert out.getvalue() == "privatize x.csv: 250 of 1,000 rows (25%), 25 rows/s, 30 s left (part 3 of 8)\n"


@pytest.mark.parametrize(("done", "total", "elapsed", "left"), [
    (25, 100, 10.0, 30.0), (1, 3, 1.0, 2.0), (100, 100, 5.0, 0.0), (120, 100, 5.0, 0.0),
    (0, 100, 5.0, None), (10, None, 5.0, None), (10, 100, 0.0, None),
])
def test_eta_seconds(done, total, elapsed, left):
    assert eta_seconds(done, total, elapsed) == left


def test_long_eta_in_minutes_and_hours():
    rep, _ = make(Tty())
    assert rep.line(1, 100, now=rep.start + 10).endswith("16 min 30 s left")
    assert rep.line(1, 1000, now=rep.start + 10).endswith("2 h 46 min left")


def test_report_without_a_callback_is_a_no_op():
    seen = []
    report(None, 1, 2, "x")
    report(lambda *a: seen.append(a), 1, 2, "x")
    assert seen == [(1, 2, "x")]


def test_a_new_pass_restarts_the_rate():
    out = Tty()
    rep, clock = make(out)
    clock.t += 10.0
    rep(1000, 1000, "first pass")  # 100 rows/s
    clock.t += 1.0
    rep(0, 1000, "releasing")  # a new pass starts here
    clock.t += 4.0
    rep(2000, 4000, "releasing")
    last = out.getvalue().splitlines()[-1]
    assert last == "privatize x.csv: 2,000 of 4,000 rows (50%), 500 rows/s, 4 s left (releasing)"


def test_local_engine_one_line_per_interval(tmp_path):
    """The local engine's ticks through one reporter: one line per interval, none twice."""
    from metricdp import MetricSpace
    from metricdp.mechanisms.base import certify
    from metricdp.streaming import privatize_file

    space = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
    mech = certify([[0.6, 0.4], [0.4, 0.6]], space, 1.0, "tiny")
    src = tmp_path / "in.csv"
    src.write_text("w\n" + "a\nb\n" * 500)
    ticks = []

    class Stepping:  # one second per look at the clock: the reporter looks once per tick
        t = 0.0

        def __call__(self) -> float:
            self.t += 1.0
            return self.t

    out = Tty()
    rep = ProgressReporter("privatize in.csv", stream=out, clock=Stepping(), interval=2.0)
    privatize_file(mech, src, "w", tmp_path / "out.csv", chunk_rows=100,
                   progress=lambda d, t, m: (ticks.append(d), rep(d, t, m)))
    lines = out.getvalue().splitlines()
    assert ticks == list(range(100, 1001, 100))
    assert len(lines) == len(ticks) // 2 == len(set(lines))
    assert lines[-1] == "privatize in.csv: 1,000 rows, 100 rows/s (releasing)"


def test_a_sink_gets_every_tick_on_a_terminal_and_nothing_elsewhere():
    for stream, expected in ((Tty(), 3), (io.StringIO(), 0)):
        got: list[tuple[int, int | None, str]] = []
        clock = Clock()
        rep = ProgressReporter("build", "LPs", stream=stream, clock=clock, interval=2.0,
                               sink=lambda d, t, line, got=got: got.append((d, t, line)))
        for step in (1, 2):
            clock.t += 0.5  # within the interval: a bar redraws in place, so every tick counts
            rep(step, 4, f"round {step}")
        rep.update("repair")
        assert len(got) == expected and stream.getvalue() == ""
        if expected:
            assert got[0] == (1, 4, "build: 1 of 4 LPs (25%), 2 LPs/s, 2 s left (round 1)")
            assert got[2][:2] == (2, 4) and got[2][2].endswith("(repair)")


def test_a_line_before_anything_is_counted_names_the_work_and_its_message():
    rep, _ = make(Tty())
    assert rep.line(0, None, "reading x.csv", now=rep.start + 5) == "privatize x.csv (reading x.csv)"
    assert rep.line(0, None, "", now=rep.start + 5) == "privatize x.csv"
