"""`metricdp privatize` per person: eps by hand, refuse/drop, the ledger across processes and kill -9, --consistent."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from metricdp import MetricSpace, load_mechanism
from metricdp.accounting.composition import to_units
from metricdp.accounting.ledger import Ledger
from metricdp.mechanisms.base import certify
from tests.accounting.conftest import pg_url  # noqa: F401  (the PostgreSQL fixture, skipping without a server)
from tests.cli._acct_worker import STEPS
from tests.cli_helpers import assert_one_line_error, run

LABELS = ["Paris", "Lyon", "Lille", "Nice"]
EPS = 0.004
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mech_file(tmp_path: Path) -> Path:
    latlon = [[48.8566, 2.3522], [45.7640, 4.8357], [50.6292, 3.0573], [43.7102, 7.2620]]
    space = MetricSpace.from_points(latlon, LABELS, metric="haversine")
    m = np.exp(-EPS * np.asarray(space.distances) / 2)
    path = tmp_path / "m.npz"
    certify(m / m.sum(axis=1, keepdims=True), space, EPS, "exponential").save(path)
    return path


def _write(path: Path, rows: list[list[str]], newline: str = "\n") -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator=newline).writerows(rows)
    return path


def _read(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _json(result: object) -> dict:
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    return json.loads(result.stdout.strip().splitlines()[0])  # type: ignore[attr-defined]


def _checkins(tmp_path: Path, people: dict[str, list[str]], name: str = "in.csv") -> Path:
    """One row per (person, city) in round-robin order, a unique row id in column ``t``."""
    rows, k = [["user", "t", "city"]], 0
    longest = max(len(v) for v in people.values())
    for i in range(longest):
        for user, cities in people.items():
            if i < len(cities):
                rows.append([user, f"r{k}", cities[i]])
                k += 1
    return _write(tmp_path / name, rows)


# ---------------------------------------------------------------------------------------------- by hand
def test_per_person_eps_by_hand(mech_file: Path, tmp_path: Path) -> None:
    """ann 3 rows (Paris, Paris, Lyon), bob 1, cy 2 (Nice, Nice) at eps 0.004 each."""
    inp = _checkins(tmp_path, {"ann": ["Paris", "Paris", "Lyon"], "bob": ["Lille"], "cy": ["Nice", "Nice"]})
    base = ("privatize", mech_file, inp, "-c", "city", "--keep", "user", "--keep", "t", "--json")
    # every row: ann 3 x 0.004, bob 0.004, cy 0.008
    acc = _json(run(*base, "-o", tmp_path / "a.csv", "--user-column", "user"))["accounting"]
    assert acc["eps_per_person_run"] == {"persons": 3, "max": 0.012, "median": 0.008, "p90": 0.012, "p99": 0.012,
                                         "mean": pytest.approx(0.008)}
    assert (acc["rows_in"], acc["rows_released"], acc["withheld_cap"], acc["persons_in"]) == (6, 6, 0, 3)
    assert acc["eps_per_person_total"] is None
    # at most 2 rows each: ann 0.008, bob 0.004, cy 0.008; one of ann's rows withheld
    acc = _json(run(*base, "-o", tmp_path / "b.csv", "--user-column", "user", "--max-rows-per-user", "2"))
    acc = acc["accounting"]
    assert (acc["eps_per_person_run"]["max"], acc["eps_per_person_run"]["median"]) == (0.008, 0.008)
    assert (acc["rows_released"], acc["withheld_cap"]) == (5, 1)
    assert sum(r[0] == "ann" for r in _read(tmp_path / "b.csv")[1:]) == 2
    # consistent: one release per (person, city): ann 2 x 0.004, bob 0.004, cy 0.004
    acc = _json(run(*base, "-o", tmp_path / "c.csv", "--user-column", "user", "--consistent"))["accounting"]
    assert acc["eps_per_person_run"] == {"persons": 3, "max": 0.008, "median": 0.004, "p90": 0.008, "p99": 0.008,
                                         "mean": pytest.approx(0.016 / 3)}
    assert acc["fresh_releases"] == 4
    out = _read(tmp_path / "c.csv")
    by_t = {r[1]: r[2] for r in out[1:]}
    assert by_t["r0"] == by_t["r3"]  # ann's two Paris rows share one release
    assert by_t["r2"] == by_t["r4"]  # cy's two Nice rows
    # a budget of 0.008 for this run only: ann is over; drop withholds one of her rows, chosen at random
    res = run(*base, "-o", tmp_path / "d.csv", "--user-column", "user", "--budget", "0.008", "--over-budget", "drop")
    acc = _json(res)["accounting"]
    assert (acc["withheld_budget"], acc["persons_over"], acc["rows_released"]) == (1, 1, 5)
    assert acc["eps_per_person_run"]["max"] == 0.008


def test_table_output_states_the_guarantee(mech_file: Path, tmp_path: Path) -> None:
    inp = _checkins(tmp_path, {"ann": ["Paris", "Lyon"], "bob": ["Lille"]})
    res = run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "o.csv", "--user-column", "user",
              "--budget", "1", "--max-rows-per-user", "1")
    assert res.exit_code == 0, res.output
    assert "eps per person, this run: max 0.004, median 0.004" in res.stdout
    assert "withheld: 1 by --max-rows-per-user 1; 0 by the budget (0 persons over)" in res.stdout
    assert "eps_p <= 0.004 per km" in res.stdout  # the space's unit


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("args", "fragments"), [
    (["--budget", "1"], ["--budget needs --user-column COL"]),
    (["--max-rows-per-user", "2", "--consistent"], ["--max-rows-per-user, --consistent need --user-column"]),
    (["--user-column", "user", "--ledger-key", "k"], ["--ledger-key", "give --ledger"]),
    (["--user-column", "user", "--over-budget", "drop"], ["--over-budget needs a budget"]),
    (["--user-column", "user", "--budget", "0"], ["--budget must be a finite number > 0"]),
    (["--user-column", "user", "--budget", "nan"], ["--budget must be a finite number > 0"]),
    (["--user-column", "user", "--ledger", "postgresql://h/db"], ["--ledger given by URL needs --ledger-key"]),
    (["--user-column", "who"], ["no user column 'who'"]),
    (["--user-column", "city"], ["the user column 'city' is the released column"]),
    (["--user-column", "user", "--ledger", "{tmp}/new.db"], ["--ledger", "create it with --budget B"]),
])
def test_option_combinations_that_mean_nothing(mech_file: Path, tmp_path: Path, args: list[str],
                                               fragments: list[str]) -> None:
    inp = _checkins(tmp_path, {"ann": ["Paris"]})
    out = tmp_path / "o.csv"
    res = run("privatize", mech_file, inp, "-c", "city", "-o", out, *(a.format(tmp=tmp_path) for a in args))
    assert_one_line_error(res, *fragments)
    assert not out.exists() and not (tmp_path / "new.db").exists()


def test_empty_person_is_refused_with_its_line(mech_file: Path, tmp_path: Path) -> None:
    inp = _write(tmp_path / "in.csv", [["user", "city"], ["ann", "Paris"], ["", "Lyon"]])
    res = run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "o.csv", "--user-column", "user")
    assert_one_line_error(res, "user column 'user' is empty in 1 row(s) (first at line(s) 3)")


def test_refuse_writes_nothing_and_spends_nothing(mech_file: Path, tmp_path: Path) -> None:
    inp = _checkins(tmp_path, {"ann": ["Paris"] * 3, "bob": ["Lyon"], "cy": ["Nice"] * 4})
    ledger, out = tmp_path / "l.db", tmp_path / "o.csv"
    out.write_text("old\n")
    res = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--user-column", "user", "--budget", "0.008",
              "--ledger", ledger)
    assert_one_line_error(res, "--over-budget refuse: 2 of 3 persons would exceed their budget of 0.008",
                          "nothing written, nothing spent")
    assert out.read_text() == "old\n"  # not clobbered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "m.npz", "o.csv"]  # the new ledger is gone
    with Ledger(ledger, budget=0.008) as book:  # an existing ledger keeps its state: nothing spent, no run
        book.commit(book.reserve(["bob"], 0.004, unit="km").run_id)
    res = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--user-column", "user", "--ledger", ledger)
    assert_one_line_error(res, "--over-budget refuse: 2 of 3 persons")
    with Ledger(ledger) as book:
        assert book.spent(["ann", "bob", "cy"]).tolist() == [0.0, 0.004, 0.0]
        assert len(book.runs_table()) == 1


def test_drop_leaves_withheld_records_out_byte_for_byte(mech_file: Path, tmp_path: Path) -> None:
    """CRLF records, a quoted field, chunks of 2 rows: the output is the input without the withheld records."""
    rows = [["user", "t", "city"]] + [[u, f'r{i}, "q"', "Paris"] for i, u in enumerate("aabacabbcaa")]
    inp = _write(tmp_path / "in.csv", rows, newline="\r\n")
    out = tmp_path / "o.csv"
    res = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--user-column", "user", "--budget", "0.008",
              "--over-budget", "drop", "--keep", "user", "--keep", "t", "--chunk-rows", "2", "--json")
    acc = _json(res)["accounting"]
    got = out.read_bytes().split(b"\r\n")
    src = inp.read_bytes().split(b"\r\n")
    assert got[0] == src[0] and got[-1] == b"" and src[-1] == b""
    kept = [line.rsplit(b",", 1)[0] for line in got[1:-1]]
    whole = [line.rsplit(b",", 1)[0] for line in src[1:-1]]
    assert kept == [w for w in whole if w in set(kept)]  # a subsequence, bytes kept
    counts = {u: sum(line.startswith(u.encode()) for line in kept) for u in "abc"}
    assert counts == {"a": 2, "b": 2, "c": 2}  # floor(0.008 / 0.004)
    assert acc["withheld_budget"] == len(whole) - 6 and acc["persons_over"] == 2  # c has 2 rows: not over


def test_parquet_drop(mech_file: Path, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    users = [7, 7, 7, 8, 9, 9]
    pq.write_table(pa.table({"user": users, "t": list(range(6)), "city": ["Paris"] * 6}), tmp_path / "in.parquet")
    out = tmp_path / "o.parquet"
    res = run("privatize", mech_file, tmp_path / "in.parquet", "-c", "city", "-o", out, "--user-column", "user",
              "--max-rows-per-user", "1", "--keep", "user", "--keep", "t", "--json", "--chunk-rows", "4")
    acc = _json(res)["accounting"]
    table = pq.read_table(out)
    assert sorted(table.column("user").to_pylist()) == [7, 8, 9]
    assert table.schema == pq.read_table(tmp_path / "in.parquet").schema
    assert acc["withheld_cap"] == 3


# ---------------------------------------------------------------------------------------------- --consistent
def test_consistent_is_identical_across_runs_and_free(mech_file: Path, tmp_path: Path) -> None:
    inp = _checkins(tmp_path, {"ann": ["Paris", "Lyon", "Paris"], "bob": ["Nice", "Nice"]})
    ledger = tmp_path / "l.db"
    outs = []
    for k in range(3):
        out = tmp_path / f"o{k}.csv"
        res = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--user-column", "user", "--consistent",
                  "--ledger", ledger, "--budget", "0.02", "--keep", "user", "--keep", "t", "--json")
        acc = _json(res)["accounting"]
        outs.append(_read(out))
        assert acc["fresh_releases"] == (3 if k == 0 else 0)
        assert acc["eps_per_person_total"]["max"] == 0.008  # ann: Paris and Lyon, once
    assert outs[0] == outs[1] == outs[2]
    with Ledger(ledger) as book:
        assert book.spent(["ann", "bob"]).tolist() == [0.008, 0.004]


def test_consistent_first_releases_follow_the_mechanism(mech_file: Path, tmp_path: Path) -> None:
    """3000 persons, each with Lille twice: one release per person, distributed as the Lille row (chi-square)."""
    rows = [["user", "city"]] + [[f"u{i}", "Lille"] for i in range(3000)] * 2
    inp = _write(tmp_path / "in.csv", rows)
    out = tmp_path / "o.csv"
    res = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--user-column", "user", "--consistent",
              "--keep", "user", "--ledger", tmp_path / "l.db", "--budget", "1", "--seed", "3")  # a fixed draw
    assert res.exit_code == 0, res.output
    got = _read(out)[1:]
    first = {u: c for u, c in got[:3000]}
    assert all(first[u] == c for u, c in got[3000:])  # the repeat shows the same release
    counts = np.bincount([LABELS.index(c) for c in first.values()], minlength=4)
    p = np.asarray(load_mechanism(mech_file).matrix)[LABELS.index("Lille")]
    assert stats.chisquare(counts, 3000 * p).pvalue > 1e-3


# ---------------------------------------------------------------------------------------------- processes
def _cli(args: list[object], kill_at: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env.pop("ACCT_KILL_AT", None)
    if kill_at:
        env["ACCT_KILL_AT"] = kill_at
    return subprocess.Popen([sys.executable, "-m", "tests.cli._acct_worker", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


PEOPLE = {"ann": ["Paris", "Lyon"] * 3, "bob": ["Nice"] * 5, "cy": ["Lille", "Lyon", "Paris"], "dee": ["Nice"]}


def _ledger_args(target: str, key: Path | None) -> list[object]:
    return ["--ledger", target, *([] if key is None else ["--ledger-key", key])]


def _concurrent(mech_file: Path, tmp_path: Path, target: str, key: Path | None) -> None:
    inp = _checkins(tmp_path, PEOPLE)
    budget = 0.02  # 5 rows of 0.004 per person
    Ledger(target, budget=budget, key_file=key).close()
    procs = [_cli(["privatize", mech_file, inp, "-c", "city", "-o", tmp_path / f"o{k}.csv", "--user-column", "user",
                   *_ledger_args(target, key), "--over-budget", "drop", "--keep", "user", "--keep", "t"])
             for k in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()
    released = dict.fromkeys(PEOPLE, 0)
    for k in range(4):
        for row in _read(tmp_path / f"o{k}.csv")[1:]:
            released[row[0]] += 1
    cap = to_units(budget, budget=True) // to_units(EPS)
    assert cap == 5
    # demand (4 runs x 6, 5, 3 and 1 rows) exceeds the budget but for dee: never more than 5
    assert released == {"ann": 5, "bob": 5, "cy": 5, "dee": 4}
    with Ledger(target, key_file=key) as book:
        book.check_integrity()
        assert [round(x, 12) for x in book.spent(list(PEOPLE)).tolist()] == [0.02, 0.02, 0.02, 0.016]


def test_four_processes_one_sqlite_ledger(mech_file: Path, tmp_path: Path) -> None:
    _concurrent(mech_file, tmp_path, str(tmp_path / "l.db"), None)


def test_four_processes_one_postgresql_ledger(mech_file: Path, tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    _concurrent(mech_file, tmp_path, pg_url, tmp_path / "pg.key")


def _crash_runs(mech_file: Path, tmp_path: Path, runs: int, seed: int) -> None:
    """``runs`` CLI runs against one ledger, 5 at a time, each killed at a step or at a random time."""
    inp = _checkins(tmp_path, PEOPLE)
    ledger = tmp_path / "l.db"
    budget = 0.2  # 50 rows per person: the crashes, not the budget, decide
    Ledger(ledger, budget=budget).close()
    rng = np.random.default_rng(seed)
    plan = [STEPS[i % len(STEPS)] if i % 2 == 0 else None for i in range(runs)]
    for wave in range(0, runs, 5):
        procs = []
        for k in range(wave, min(wave + 5, runs)):
            args = ["privatize", mech_file, inp, "-c", "city", "-o", tmp_path / f"o{k}.csv", "--user-column", "user",
                    "--ledger", ledger, "--over-budget", "drop", "--keep", "user", "--keep", "t",
                    "--chunk-rows", "4", *(["--consistent"] if k % 3 == 0 else [])]
            procs.append((_cli(args, plan[k]), plan[k]))
        time.sleep(float(rng.uniform(0.5, 3.0)))  # random kill times: imports, planning, writing or done
        for p, step in procs:
            if step is None and p.poll() is None:
                p.kill()
        for p, step in procs:
            _, err = p.communicate(timeout=180)
            assert p.returncode in ((-9,) if step else (0, -9)), (step, err.decode())
    # what the world has seen, in units: every row of a plain run, and each distinct (person, true city) of the
    # consistent runs once (a repeat is free only when a run that paid for it committed)
    true_city = {row[1]: row[2] for row in _read(inp)[1:]}
    rows = dict.fromkeys(PEOPLE, 0)
    pairs: set[tuple[str, str]] = set()
    for k in range(runs):
        out = tmp_path / f"o{k}.csv"
        if out.exists():
            for row in _read(out)[1:]:
                if k % 3 == 0:
                    pairs.add((row[0], true_city[row[1]]))
                else:
                    rows[row[0]] += 1
    assert not list(tmp_path.glob(".o*"))  # no temporary file left beside the outputs by a kill
    with Ledger(ledger) as book:
        book.check_integrity()
        spent = dict(zip(PEOPLE, book.spent_units(list(PEOPLE)).tolist(), strict=True))
        states = {r["state"] for r in book.runs_table()}
    for person in PEOPLE:
        published = (rows[person] + sum(p == person for p, _ in pairs)) * to_units(EPS)
        assert published <= spent[person] <= to_units(budget, budget=True), person
    assert "reserved" in states  # killed after reserving: stays spent


def test_kill_9_fast(mech_file: Path, tmp_path: Path) -> None:
    _crash_runs(mech_file, tmp_path, 5, 1)


@pytest.mark.slow
def test_kill_9_fifty_runs(mech_file: Path, tmp_path: Path) -> None:
    _crash_runs(mech_file, tmp_path, 50, 2)


def test_failure_after_reserving_gives_the_budget_back(mech_file: Path, tmp_path: Path) -> None:
    """A value that is not a label is found by the release pass: nothing spent (with one read of the file, the
    release pass comes before the plan, so nothing was even reserved: no run in the ledger)."""
    inp = _write(tmp_path / "in.csv", [["user", "city"], ["ann", "Paris"], ["bob", "Rome"]])
    ledger, out = tmp_path / "l.db", tmp_path / "o.csv"
    res = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--user-column", "user", "--budget", "1",
              "--ledger", ledger)
    assert_one_line_error(res, "'Rome'", "nothing written")
    assert not out.exists() and not ledger.exists()  # the ledger this run created saw no run: removed
