"""``metricdp data ais``: the AIS tracks of tracktable-data as a person,time,lat,lon table."""

from __future__ import annotations

import csv
import importlib.util
import json

import numpy as np
import pytest

from metricdp._optional import available
from metricdp.location.traces import read_traces
from tests.cli_helpers import assert_one_line_error, run

NEEDS_TRACKTABLE = pytest.mark.skipif(
    not available("traces"), reason="the AIS files come with tracktable-data: pip install 'metricdp[traces]'"
)
DAY = "NYHarbor_2020_12_08"


@NEEDS_TRACKTABLE
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_writes_the_trace_table(tmp_path, suffix):
    from metricdp.data.ais import ais_traces

    out = tmp_path / f"ais{suffix}"
    result = run("data", "ais", "--dataset", DAY, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["fixes"], summary["persons"]) == (9091, 37)
    assert summary["columns"] == ["person", "time", "lat", "lon"]
    person, time, latlon = read_traces(out, person="person", key="time")
    t = ais_traces(DAY)
    assert person.tolist() == t.person.tolist()
    assert time.tolist() == np.datetime_as_string(t.time, unit="s").tolist()
    assert latlon.tolist() == np.column_stack([t.lat, t.lon]).tolist()  # exact: repr round-trips


@NEEDS_TRACKTABLE
def test_default_name_and_text_summary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("data", "ais", "--dataset", DAY)
    assert result.exit_code == 0, result.output
    assert "wrote ais-NYHarbor_2020_12_08.csv: 9091 fixes of 37 vessels" in result.stdout
    with open(tmp_path / f"ais-{DAY}.csv", encoding="utf-8", newline="") as fh:
        assert next(csv.reader(fh)) == ["person", "time", "lat", "lon"]


def test_unknown_dataset_is_named(tmp_path):
    if not available("traces"):
        pytest.skip("the extra check comes first without tracktable-data")
    result = run("data", "ais", "--dataset", "Atlantis", "--out", tmp_path / "a.csv")
    assert_one_line_error(result, "--dataset 'Atlantis'", "known: NYHarbor_2020_12_first_week")
    assert not (tmp_path / "a.csv").exists()


def test_bad_suffix_is_refused_before_reading(tmp_path):
    if not available("traces"):
        pytest.skip("the extra check comes first without tracktable-data")
    result = run("data", "ais", "--out", tmp_path / "a.txt")
    assert_one_line_error(result, "a.txt")


def test_missing_package_names_the_extra(tmp_path, monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name.split(".")[0] == "tracktable_data" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    result = run("data", "ais", "--out", tmp_path / "a.csv")
    assert_one_line_error(result, "data ais needs the optional package 'tracktable_data'",
                          "pip install 'metricdp[traces]'")


@NEEDS_TRACKTABLE
def test_an_existing_output_is_refused_unless_overwrite(tmp_path):
    out = tmp_path / "a.csv"
    out.write_text("mine\n", encoding="utf-8")
    result = run("data", "ais", "--dataset", DAY, "--out", out)
    assert_one_line_error(result, f"--out: refusing to write {out}: the file exists", "pass --overwrite")
    assert out.read_text(encoding="utf-8") == "mine\n" and list(tmp_path.iterdir()) == [out]
    result = run("data", "ais", "--dataset", DAY, "--out", out, "--overwrite")
    assert result.exit_code == 0, result.output
    with open(out, encoding="utf-8", newline="") as fh:
        assert next(csv.reader(fh)) == ["person", "time", "lat", "lon"]
