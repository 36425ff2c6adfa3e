"""What one partition of a trace release on an engine does (:mod:`metricdp.integrations._traces`), without a cluster.

The engines' shuffle is played by hand (each row to the partition of its person's hash);
the oracle is the local engine: each person's rows, in file order, and the per-person
report, and, with grants, the rows the local engine withholds.
"""

from __future__ import annotations

import csv
import io
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.integrations._pieces import Failed, part_path
from metricdp.integrations._plan import plan_file
from metricdp.integrations._traces import (
    TracePart,
    _Checked,
    _Job,
    _person_hash,
    _Shared,
    person_keys,
    release_rows,
)
from metricdp.location.trace_report import TraceReport
from metricdp.pipeline.traces import Independent
from metricdp.streaming.traces import release_traces_file


def _input(path: Path, n: int = 90) -> Path:
    g = np.random.default_rng(5)
    lines = ["user,t,lat,lon,note"]
    for i in range(n):
        p = int(g.integers(6))
        lines.append(f"p{p},{i},{48.8 + 0.01 * p + g.normal() * 1e-3:.6f},{2.3 + g.normal() * 1e-3:.6f},n{i}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _by_person(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for r in csv.DictReader(io.StringIO(text)):
        out[r["user"]].append(r["note"])
    return dict(out)


def _first_come(src: Path) -> np.ndarray:
    """The persons of ``src`` as the file holds them, in the order they first come (the driver's codes)."""
    return np.asarray(list(dict.fromkeys(r["user"] for r in csv.DictReader(io.StringIO(src.read_text())))))


def _run(tmp_path: Path, src: Path, shared_of, partitions: int = 3) -> tuple[list[TracePart], str]:
    mech = Independent(1.0)
    check = _Checked("user", "t", "lat", "lon", mech, where=str(src))
    plan = plan_file(src, check, piece_bytes=400, keep=("note",))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    job = _Job(plan, "user", "t", "lat", "lon", 6, 11, str(scratch))
    keys = [person_keys(job, p, mech) for p in plan.pieces]
    ids, rows = np.concatenate([k[0] for k in keys]), np.concatenate([k[1] for k in keys])
    assert rows.tolist() == list(range(plan.rows))
    where = np.array([_person_hash(x) % partitions for x in ids.tolist()])
    shared = shared_of(mech, src)
    got = [release_rows(job, k, rows[where == k][::-1], ids[where == k][::-1], shared) for k in range(partitions)]
    done = [d for d in got if isinstance(d, TracePart)]
    assert len(done) == partitions, got
    parts = sorted(n for d in done for n in d.parts)
    out = io.BytesIO()
    plan.parts.join(plan.layout, [Path(part_path(str(scratch), n, plan.fmt)) for n in parts], out,
                    sum(d.written for d in done))
    return done, out.getvalue().decode()


def test_partitions_release_each_persons_rows_in_file_order_as_the_local_engine(tmp_path):
    src = _input(tmp_path / "in.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = release_traces_file(src, tmp_path / "local.csv", mechanism=Independent(1.0), user="user", time="t",
                                    lat="lat", lon="lon", keep=("note",), rng=1)
    done, text = _run(tmp_path, src, lambda mech, src: _Shared(mech))
    assert _by_person(text) == _by_person((tmp_path / "local.csv").read_text())
    assert sum(d.rows for d in done) == 90
    report = TraceReport.concat([d.report for d in done])
    order = np.argsort(report.persons)
    assert report.persons[order].tolist() == local.report.persons.tolist()  # each person in one partition
    assert report.fresh[order].tolist() == local.report.fresh.tolist()


def test_grants_bound_each_person_as_the_local_engine_bounds_them(tmp_path):
    src = _input(tmp_path / "in.csv")

    def granted(mech, src):
        persons = _first_come(src)
        return _Shared(mech, persons, np.full(persons.size, 4, dtype=np.int64))  # 4 fresh releases each

    done, text = _run(tmp_path, src, granted)
    local = _by_person(src.read_text())
    assert _by_person(text) == {p: notes[:4] for p, notes in local.items()}  # the first rows in file order
    assert sum(d.written for d in done) == 4 * len(local)


def test_a_person_the_count_did_not_see_fails_the_partition(tmp_path):
    src = _input(tmp_path / "in.csv")

    def without_one(mech, src):
        persons = _first_come(src)[1:]
        return _Shared(mech, persons, np.ones(persons.size, dtype=np.int64))

    mech = Independent(1.0)
    plan = plan_file(src, _Checked("user", "t", "lat", "lon", mech, where=str(src)), keep=("note",))
    job = _Job(plan, "user", "t", "lat", "lon", 6, None, str(tmp_path))
    ids, rows = person_keys(job, plan.pieces[0], mech)
    got = release_rows(job, 0, rows, ids, without_one(mech, src))
    assert isinstance(got, Failed) and not got.input and "did not see" in got.message


def test_fixes_per_person_other_than_the_drivers_counts_fail_the_partition(tmp_path):
    src = _input(tmp_path / "in.csv")
    mech = Independent(1.0)
    check = _Checked("user", "t", "lat", "lon", mech, where=str(src))
    plan = plan_file(src, check, keep=("note",))
    persons = check.persons.ids
    counts = check.rows[:persons.size].copy()
    assert int(counts.sum()) == plan.rows  # the check pass counted every fix once
    job = _Job(plan, "user", "t", "lat", "lon", 6, None, str(tmp_path))
    ids, rows = person_keys(job, plan.pieces[0], mech)
    grants = np.full(persons.size, 100, dtype=np.int64)
    assert isinstance(release_rows(job, 0, rows, ids, _Shared(mech, persons, grants, None, counts)), TracePart)
    counts[0] += 1  # the file as the partition reads it holds one fix fewer of the first person
    got = release_rows(job, 0, rows, ids, _Shared(mech, persons, grants, None, counts))
    assert isinstance(got, Failed) and not got.input and "other fixes per person than the driver counted" in got.message


def test_the_drivers_check_refuses_the_first_fix_out_of_order_in_the_file(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("user,t,lat,lon\na,1,0,0\nb,5,0,0\nb,4,0,0\na,0,0,0\n")
    with pytest.raises(ValidationError, match=r"person 'b': line 4 \(time 4\) comes after line 3 \(time 5\)"):
        plan_file(src, _Checked("user", "t", "lat", "lon", Independent(1.0), where=str(src)))
