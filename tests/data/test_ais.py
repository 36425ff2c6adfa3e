"""The tracktable ``.traj`` reader on fixture files written here, and the AIS datasets of tracktable-data."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from metricdp._optional import MissingExtraError, available
from metricdp.data.ais import AIS_DATASETS, ais_path, ais_traces, read_traj
from metricdp.errors import ValidationError

NEEDS_TRACKTABLE = pytest.mark.skipif(
    not available("traces"), reason="the AIS files come with tracktable-data: pip install 'metricdp[traces]'"
)


def traj_line(points: list[tuple[str, str, float, float]], props: tuple[str, ...] = ()) -> str:
    head = ["*T*", "uuid", "terrestrial", str(len(points)), "0", "*P*", "terrestrial", "2", "1", "1", str(len(props))]
    for name in props:
        head += [name, "1"]
    body = [str(x) for who, t, lon, lat in points for x in (who, t, lon, lat, *(["7"] * len(props)))]
    return ",".join(head + body) + "\n"


def test_reads_and_sorts_by_person_then_time(tmp_path):
    path = tmp_path / "x.traj"
    path.write_text(
        traj_line([("b", "2020-12-01 10:00:05", -74.0, 40.5), ("b", "2020-12-01 10:00:01", -74.1, 40.6)])
        + "\n"  # a blank line is skipped
        + traj_line([("a", "2020-12-02 00:00:00", 1.5, -2.25)], props=("speed",)),
        encoding="utf-8",
    )
    t = read_traj(path)
    assert t.person.tolist() == ["a", "b", "b"]
    assert t.time.astype(str).tolist() == ["2020-12-02T00:00:00", "2020-12-01T10:00:01", "2020-12-01T10:00:05"]
    assert t.lat.tolist() == [-2.25, 40.6, 40.5] and t.lon.tolist() == [1.5, -74.1, -74.0]
    assert (t.n, t.persons) == (3, 2)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("hello,world\n", "line 1: not a tracktable trajectory"),
        (traj_line([("a", "2020-12-01 10:00:00", 1.0, 2.0)]).replace(",1,1,0,a", ",3,1,0,a"), "2-d points"),
        (traj_line([("a", "2020-12-01 10:00:00", 1.0, 2.0)]).replace("terrestrial,1,0,*P*", "terrestrial,2,0,*P*"),
         "line 1: 15 fields for 2 points"),
        (traj_line([("a", "2020-12-01 10:00:00", 1.0, 2.0)]).replace("terrestrial,1,0", "terrestrial,1,2"),
         "trajectory properties"),
        (traj_line([("a", "2020-12-01 10:00:00", 1.0, 2.0)]) + traj_line([("a", "2020-12-01 11:00:00", 1.0, 95.0)]),
         "line 2: coordinate out of range: lat=95.0"),
        (traj_line([("a", "2020-12-01 10:00:00", 1.0, 2.0)]).replace(",2.0", ",north"),
         "line 1: non-numeric coordinate lat='north'"),
        (traj_line([("a", "yesterday", 1.0, 2.0)]), "line 1: unreadable time 'yesterday'"),
    ],
)
def test_a_bad_line_is_one_error_naming_it(tmp_path, text, fragment):
    path = tmp_path / "bad.traj"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValidationError, match=r"bad\.traj") as info:
        read_traj(path)
    assert fragment in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ValidationError, match="no such file"):
        read_traj(tmp_path / "nope.traj")


def test_unknown_dataset_is_named():
    with pytest.raises(ValidationError, match="unknown AIS dataset 'Atlantis'; known: NYHarbor"):
        ais_path("Atlantis")


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tracktable_data", None)  # import raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'metricdp\[traces\]'"):
        ais_traces("NYHarbor_2020_12_08")


@NEEDS_TRACKTABLE
def test_every_dataset_is_installed():
    for name in AIS_DATASETS:
        assert ais_path(name).is_file(), name


@NEEDS_TRACKTABLE
def test_one_day_of_new_york_harbour():
    t = ais_traces("NYHarbor_2020_12_08")
    assert (t.n, t.persons) == (9091, 37)  # the file's 38 trajectories, one vessel appearing twice
    assert t.time.min() >= np.datetime64("2020-12-08T00:00:00") and t.time.max() < np.datetime64("2020-12-09")
    assert 40.3 < t.lat.min() and t.lat.max() < 41.0 and -74.4 < t.lon.min() and t.lon.max() < -73.6
    order = np.lexsort((t.time, t.person))
    assert (order == np.arange(t.n)).all()
