"""`metricdp privatize-points` per person: eps by hand, refuse/drop, the cap, --consistent with a ledger, processes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metricdp.accounting.composition import to_units
from metricdp.accounting.ledger import Ledger
from tests.cli_helpers import assert_one_line_error, run

ROOT = Path(__file__).resolve().parents[2]
PARIS, LYON, LILLE, NICE = ("48.8566", "2.3522"), ("45.764", "4.8357"), ("50.6292", "3.0573"), ("43.7102", "7.262")
EPS = 0.5  # per km
LATTICE = ("--origin", "46.5,4", "--extent", "600km")


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


def _checkins(tmp_path: Path, people: dict[str, list[tuple[str, str]]], name: str = "in.csv") -> Path:
    """One row per (person, place) in round-robin order, a unique row id in column ``t``."""
    rows, k = [["user", "t", "lat", "lon"]], 0
    for i in range(max(len(v) for v in people.values())):
        for user, places in people.items():
            if i < len(places):
                rows.append([user, f"r{k}", *places[i]])
                k += 1
    return _write(tmp_path / name, rows)


THREE = {"ann": [PARIS, PARIS, LYON], "bob": [LILLE], "cy": [NICE, NICE]}


def _points(inp: Path, out: Path, *args: object) -> object:
    return run("privatize-points", inp, "--lat", "lat", "--lon", "lon", "-e", f"{EPS}/km", *LATTICE, "-o", out,
               "--keep", "user", "--keep", "t", *args)


# ---------------------------------------------------------------------------------------------- by hand
def test_per_person_eps_by_hand(tmp_path: Path) -> None:
    """ann 3 rows (Paris, Paris, Lyon), bob 1 (Lille), cy 2 (Nice, Nice) at 0.5/km each."""
    inp = _checkins(tmp_path, THREE)
    # every row: ann 3 x 0.5, bob 0.5, cy 1.0
    acc = _json(_points(inp, tmp_path / "a.csv", "--user-column", "user", "--json"))["accounting"]
    run_eps = acc["eps_per_person_run"]
    assert (run_eps["persons"], run_eps["max"], run_eps["median"]) == (3, 1.5, 1.0)
    assert run_eps["mean"] == pytest.approx(1.0)
    assert (acc["rows_in"], acc["rows_released"], acc["withheld_cap"], acc["persons_in"]) == (6, 6, 0, 3)
    assert acc["eps_per_person_total"] is None and acc["epsilon_unit"] == "per km"
    assert acc["additive_per_person_max"] == pytest.approx(3 * acc["additive_per_release"])
    # at most 2 rows each: ann 1.0, bob 0.5, cy 1.0
    acc = _json(_points(inp, tmp_path / "b.csv", "--user-column", "user", "--max-rows-per-user", "2", "--json"))
    acc = acc["accounting"]
    assert (acc["eps_per_person_run"]["max"], acc["eps_per_person_run"]["median"]) == (1.0, 1.0)
    assert (acc["rows_released"], acc["withheld_cap"]) == (5, 1)
    assert sum(r[0] == "ann" for r in _read(tmp_path / "b.csv")[1:]) == 2
    # consistent: one release per (person, point): ann 2 x 0.5, bob 0.5, cy 0.5
    acc = _json(_points(inp, tmp_path / "c.csv", "--user-column", "user", "--consistent", "--json"))["accounting"]
    run_eps = acc["eps_per_person_run"]
    assert (run_eps["max"], run_eps["median"], acc["fresh_releases"]) == (1.0, 0.5, 4)
    assert run_eps["mean"] == pytest.approx(2 / 3)
    by_t = {r[1]: r[2:] for r in _read(tmp_path / "c.csv")[1:]}
    assert by_t["r0"] == by_t["r3"]  # ann's two Paris rows share one release
    assert by_t["r2"] == by_t["r4"]  # cy's two Nice rows
    assert by_t["r0"] != by_t["r5"]  # ann's Lyon row is another release
    # a budget of 1.0 for this run only: ann is over; drop withholds one of her rows
    acc = _json(_points(inp, tmp_path / "d.csv", "--user-column", "user", "--budget", "1", "--over-budget", "drop",
                        "--json"))["accounting"]
    assert (acc["withheld_budget"], acc["persons_over"], acc["rows_released"]) == (1, 1, 5)
    assert acc["eps_per_person_run"]["max"] == 1.0
    assert len(_read(tmp_path / "d.csv")) == 1 + 5


def test_table_output_states_the_guarantee(tmp_path: Path) -> None:
    inp = _checkins(tmp_path, THREE)
    res = _points(inp, tmp_path / "o.csv", "--user-column", "user", "--budget", "5", "--max-rows-per-user", "1")
    assert res.exit_code == 0, res.output
    assert "wrote" in res.stdout and "3 points" in res.stdout
    assert "eps per person, this run: max 0.5, median 0.5" in res.stdout
    assert "withheld: 3 by --max-rows-per-user 1; 0 by the budget (0 persons over)" in res.stdout
    assert "eps_p <= 0.5 per km" in res.stdout
    assert "plus the lattice's additive" in res.stdout


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("args", "fragments"), [
    (["--budget", "1"], ["--budget needs --user-column COL"]),
    (["--user-column", "user", "--over-budget", "drop"], ["--over-budget needs a budget"]),
    (["--user-column", "who"], ["no user column 'who'"]),
    (["--user-column", "lat"], ["the user column 'lat' is a released coordinate"]),
    (["--user-column", "user", "--ledger", "{tmp}/new.db"], ["--ledger", "create it with --budget B"]),
])
def test_option_combinations_that_mean_nothing(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    inp = _checkins(tmp_path, {"ann": [PARIS]})
    out = tmp_path / "o.csv"
    res = _points(inp, out, *(a.format(tmp=tmp_path) for a in args))
    assert_one_line_error(res, *fragments)
    assert not out.exists() and not (tmp_path / "new.db").exists()


def test_empty_person_is_refused_with_its_line(tmp_path: Path) -> None:
    inp = _write(tmp_path / "in.csv", [["user", "t", "lat", "lon"], ["ann", "a", *PARIS], ["", "b", *LYON]])
    res = _points(inp, tmp_path / "o.csv", "--user-column", "user")
    assert_one_line_error(res, "user column 'user' is empty in 1 row(s) (first at line(s) 3)")


def test_refuse_writes_nothing_and_spends_nothing(tmp_path: Path) -> None:
    inp = _checkins(tmp_path, THREE)
    ledger, out = tmp_path / "l.db", tmp_path / "o.csv"
    out.write_text("old\n")
    res = _points(inp, out, "--user-column", "user", "--budget", "1", "--ledger", ledger)
    assert_one_line_error(res, "--over-budget refuse: 1 of 3 persons would exceed their budget of 1",
                          "nothing written, nothing spent")
    assert out.read_text() == "old\n"  # not clobbered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "o.csv"]  # the ledger it created: removed


def test_a_bad_point_is_refused_before_anything_is_reserved(tmp_path: Path) -> None:
    """The first pass checks every point (degrees, the lattice's extent): the ledger sees no run at all."""
    for bad, fragment in (("95", "data row 3"), ("40.0", "data row 3 (40, 2.3522) is")):
        inp = _write(tmp_path / "in.csv", [["user", "t", "lat", "lon"], ["ann", "a", *PARIS], ["bob", "b", *LYON],
                                           ["cy", "c", bad, "2.3522"]])
        ledger, out = tmp_path / "l.db", tmp_path / "o.csv"
        res = _points(inp, out, "--user-column", "user", "--budget", "5", "--ledger", ledger)
        assert_one_line_error(res, fragment)
        assert not out.exists() and not ledger.exists()  # the new ledger saw no run: removed


# ---------------------------------------------------------------------------------------------- output
def test_drop_leaves_withheld_records_out_byte_for_byte(tmp_path: Path) -> None:
    """CRLF records, a quoted field, chunks of 2 rows: the output is the input without the withheld records."""
    rows = [["user", "t", "lat", "lon"]] + [[u, f'r{i}, "q"', *PARIS] for i, u in enumerate("aabacabbcaa")]
    inp = _write(tmp_path / "in.csv", rows, newline="\r\n")
    out = tmp_path / "o.csv"
    res = _points(inp, out, "--user-column", "user", "--budget", "1", "--over-budget", "drop", "--chunk-rows", "2",
                  "--json")
    acc = _json(res)["accounting"]
    got, src = out.read_bytes().split(b"\r\n"), inp.read_bytes().split(b"\r\n")
    assert got[0] == src[0] and got[-1] == b"" and src[-1] == b""
    kept = [line.rsplit(b",", 2)[0] for line in got[1:-1]]
    whole = [line.rsplit(b",", 2)[0] for line in src[1:-1]]
    assert kept == [w for w in whole if w in set(kept)]  # a subsequence, bytes kept
    counts = {u: sum(line.startswith(u.encode()) for line in kept) for u in "abc"}
    assert counts == {"a": 2, "b": 2, "c": 2}  # floor(1.0 / 0.5)
    assert acc["withheld_budget"] == len(whole) - 6 and acc["persons_over"] == 2


def test_parquet_and_geojson_cap(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    users = [7, 7, 7, 8, 9, 9]
    lat, lon = [float(PARIS[0])] * 6, [float(PARIS[1])] * 6
    pq.write_table(pa.table({"user": users, "t": list(range(6)), "lat": lat, "lon": lon}), tmp_path / "in.parquet")
    out = tmp_path / "o.parquet"
    acc = _json(_points(tmp_path / "in.parquet", out, "--user-column", "user", "--max-rows-per-user", "1", "--json",
                        "--chunk-rows", "4"))["accounting"]
    table = pq.read_table(out)
    assert sorted(table.column("user").to_pylist()) == [7, 8, 9]
    assert acc["withheld_cap"] == 3
    gj = tmp_path / "o.geojson"
    _json(_points(tmp_path / "in.parquet", gj, "--user-column", "user", "--max-rows-per-user", "2", "--json"))
    feats = json.loads(gj.read_text())["features"]
    assert sorted(f["properties"]["user"] for f in feats) == [7, 7, 8, 9, 9]


# ---------------------------------------------------------------------------------------------- --consistent
def test_consistent_is_identical_across_runs_and_free(tmp_path: Path) -> None:
    inp = _checkins(tmp_path, {"ann": [PARIS, LYON, PARIS], "bob": [NICE, NICE]})
    ledger = tmp_path / "l.db"
    outs = []
    for k in range(3):
        out = tmp_path / f"o{k}.csv"
        acc = _json(_points(inp, out, "--user-column", "user", "--consistent", "--ledger", ledger, "--budget", "2",
                            "--json"))["accounting"]
        outs.append(_read(out))
        assert acc["fresh_releases"] == (3 if k == 0 else 0)
        assert acc["eps_per_person_total"]["max"] == 1.0  # ann: Paris and Lyon, once
    assert outs[0] == outs[1] == outs[2]
    with Ledger(ledger) as book:
        assert book.spent(["ann", "bob"]).tolist() == [1.0, 0.5]
    # another epsilon is another mechanism: fresh releases, paid again
    acc = _json(run("privatize-points", inp, "--lat", "lat", "--lon", "lon", "-e", "0.25/km", *LATTICE, "-o",
                    tmp_path / "e.csv", "--keep", "user", "--keep", "t", "--user-column", "user", "--consistent",
                    "--ledger", ledger, "--json"))["accounting"]
    assert acc["fresh_releases"] == 3 and acc["eps_per_person_total"]["max"] == 1.5


# ---------------------------------------------------------------------------------------------- processes
def _cli(args: list[object]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env.pop("ACCT_KILL_AT", None)
    return subprocess.Popen([sys.executable, "-m", "tests.cli._acct_worker", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_two_processes_one_sqlite_ledger_never_overspend(tmp_path: Path) -> None:
    inp = _checkins(tmp_path, THREE)
    ledger = tmp_path / "l.db"
    budget = 1.0  # 2 releases of 0.5 per person
    Ledger(ledger, budget=budget).close()
    procs = [_cli(["privatize-points", inp, "--lat", "lat", "--lon", "lon", "-e", f"{EPS}/km", *LATTICE, "-o",
                   tmp_path / f"o{k}.csv", "--user-column", "user", "--ledger", ledger, "--over-budget", "drop",
                   "--keep", "user", "--keep", "t"]) for k in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()
    released = dict.fromkeys(THREE, 0)
    for k in range(2):
        for row in _read(tmp_path / f"o{k}.csv")[1:]:
            released[row[0]] += 1
    assert to_units(budget, budget=True) // to_units(EPS) == 2
    assert released == {"ann": 2, "bob": 2, "cy": 2}  # demand 6, 2 and 4 rows: never more than 2
    with Ledger(ledger) as book:
        book.check_integrity()
        assert book.spent(list(THREE)).tolist() == [1.0, 1.0, 1.0]


def test_consistent_first_releases_follow_planar_laplace(tmp_path: Path) -> None:
    """1500 persons, each at Paris twice: one release per person, its displacement ~ Gamma(2, 1/eps) (KS)."""
    import numpy as np
    from scipy import stats

    n, eps = 1500, 2.0
    rows = [["user", "lat", "lon"]] + [[f"u{i}", *PARIS] for i in range(n)] * 2
    inp = _write(tmp_path / "in.csv", rows)
    out = tmp_path / "o.csv"
    res = run("privatize-points", inp, "--lat", "lat", "--lon", "lon", "-e", f"{eps}/km", *LATTICE, "-o", out,
              "--keep", "user", "--user-column", "user", "--consistent", "--ledger", tmp_path / "l.db", "--budget", "5",
              "--seed", "7")  # seeded: a fixed draw, so the test never fails by chance
    assert res.exit_code == 0, res.output
    got = _read(out)[1:]
    first = {u: (float(a), float(b)) for u, a, b in got[:n]}
    assert all(first[u] == (float(a), float(b)) for u, a, b in got[n:])  # the repeat shows the same release
    lat0, lon0 = np.radians([float(PARIS[0]), float(PARIS[1])])
    lat, lon = np.radians(np.array(list(first.values()))).T
    hav = np.sin((lat - lat0) / 2) ** 2 + np.cos(lat0) * np.cos(lat) * np.sin((lon - lon0) / 2) ** 2
    km = 2 * 6371.0088 * np.arcsin(np.sqrt(hav))
    assert stats.kstest(km, stats.gamma(2, scale=1 / eps).cdf).pvalue > 1e-3
    assert stats.kstest(km, stats.gamma(2, scale=1 / (1.5 * eps)).cdf).pvalue < 1e-3  # the test can fail


def test_kill_9_at_publishing_or_rename_stays_spent(tmp_path: Path) -> None:
    """Killed past the point of no return: the spend stays (spent >= published), no temporary file is left."""
    inp = _checkins(tmp_path, THREE)
    ledger = tmp_path / "l.db"
    Ledger(ledger, budget=10.0).close()
    procs = []
    for k, step in enumerate(("publishing", "renamed")):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "ACCT_KILL_AT": step}
        args = ["privatize-points", inp, "--lat", "lat", "--lon", "lon", "-e", f"{EPS}/km", *LATTICE, "-o",
                tmp_path / f"o{k}.csv", "--user-column", "user", "--ledger", ledger, "--keep", "user", "--keep", "t"]
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.cli._acct_worker", *map(str, args)], cwd=ROOT,
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == -9, err.decode()
    assert not (tmp_path / "o0.csv").exists() and (tmp_path / "o1.csv").exists()
    assert not list(tmp_path.glob(".o*"))
    with Ledger(ledger) as book:
        book.check_integrity()
        assert book.spent(list(THREE)).tolist() == [3.0, 1.0, 2.0]  # both runs: ann 2 x 3 rows x 0.5, ...
        assert {r["state"] for r in book.runs_table()} == {"reserved"}


def test_the_ledger_and_its_key_are_never_the_output(tmp_path: Path) -> None:
    inp = _checkins(tmp_path, THREE)
    led = tmp_path / "l.db"
    assert _points(inp, tmp_path / "a.csv", "--user-column", "user", "--budget", "5", "--ledger", led).exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("l.db")}
    for target in (led, tmp_path / "l.db.key"):
        res = _points(inp, target, "--user-column", "user", "--budget", "5", "--ledger", led)
        assert res.exit_code == 2 and "Traceback" not in res.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("l.db")} == before


def test_a_ledger_holds_one_unit(tmp_path: Path) -> None:
    # eps per km (points) and eps per unit of a value (numbers) never add up in one ledger
    inp = _checkins(tmp_path, THREE)
    led = tmp_path / "l.db"
    assert _points(inp, tmp_path / "a.csv", "--user-column", "user", "--budget", "5", "--ledger", led).exit_code == 0
    nums = _write(tmp_path / "n.csv", [["user", "age"], ["ann", "30"], ["bob", "40"]])
    res = run("privatize-numbers", nums, "--column", "age", "--epsilon", "0.1", "--range", "0,99", "--keep", "user",
              "--user-column", "user", "--ledger", led, "-o", tmp_path / "n-out.csv")
    assert_one_line_error(res, "unit")
    assert not (tmp_path / "n-out.csv").exists()


def test_a_lattice_step_whose_additive_term_exceeds_the_budget_is_refused_up_front(tmp_path: Path) -> None:
    """eps 1.5/km, --cell 10km: one release's additive 1.5 (10 sqrt 2 + 2e-6) = 21.2 > --budget 1.5."""
    inp = _checkins(tmp_path, THREE)
    base = ("privatize-points", inp, "--lat", "lat", "--lon", "lon", "-e", "1.5/km", *LATTICE, "--user-column", "user",
            "--keep", "user", "--keep", "t", "--budget", "1.5")
    for extra in ((), ("--over-budget", "drop"), ("--ledger", tmp_path / "l.db")):
        res = run(*base, "--cell", "10km", "-o", tmp_path / "o.csv", *extra)
        assert_one_line_error(res, "additive loss of one release, 21.2, exceeds the per-person budget 1.5")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # no output, no ledger
    acc = _json(run(*base, "--cell", "500m", "-o", tmp_path / "o.csv", "--over-budget", "drop", "--json"))["accounting"]
    assert acc["additive_per_release"] == pytest.approx(1.5 * (0.5 * 2**0.5 + 2e-6), rel=1e-12)
    assert acc["additive_per_person_max"] == pytest.approx(acc["additive_per_release"])  # one release each: B c
    assert acc["rows_released"] == 3 and acc["withheld_budget"] == 3
