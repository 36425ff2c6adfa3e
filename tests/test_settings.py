"""The settings block: what a result was computed from, as text and JSON."""

from __future__ import annotations

import hashlib

import pytest

from metricdp._version import __version__
from metricdp.errors import ValidationError
from metricdp.settings import Settings, file_sha256, settings_for


def test_file_sha256_is_the_hash_of_the_bytes(tmp_path):
    path = tmp_path / "points.csv"
    data = b"label,x\n" + b"a,1\n" * 300_000  # more than one read block
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    with pytest.raises(ValidationError, match="cannot be read"):
        file_sha256(tmp_path / "missing.csv")


def test_settings_name_files_by_base_name_and_hash_the_input(tmp_path):
    points, prior = tmp_path / "caps.csv", tmp_path / "secret-dir-prior.csv"
    points.write_text("label,lat,lon\n")
    prior.write_text("a,1\n")
    s = settings_for("exponential", 0.5, unit="km", prior=prior, input=points, target="E = 10 km")
    assert s.as_dict() == {"mechanism": "exponential", "epsilon": 0.5, "epsilon_unit": "km",
                           "prior": "secret-dir-prior.csv", "target": "E = 10 km", "metricdp_version": __version__,
                           "input": "caps.csv", "input_sha256": hashlib.sha256(points.read_bytes()).hexdigest()}
    text = s.text()
    assert str(tmp_path) not in text  # a directory is not published
    assert text.splitlines() == [
        "settings",
        "  mechanism:    exponential",
        "  epsilon:      0.5 per km",
        "  prior:        secret-dir-prior.csv",
        "  target:       E = 10 km",
        f"  metricdp:     {__version__}",
        "  input:        caps.csv",
        f"  input sha256: {s.input_sha256}",
    ]


def test_an_epsilon_grid_is_described_by_its_ends_or_listed_when_short():
    grid = settings_for(["exponential", "optimal"], (0.1, 1.0, 10.0, 100.0, 1000.0))
    assert grid.mechanism == "exponential, optimal" and grid.prior == "uniform" and grid.input is None
    assert grid.epsilon_text() == "5 values from 0.1 to 1000 per unit of distance (log-spaced)"
    assert grid.as_dict()["epsilon"] == [0.1, 1.0, 10.0, 100.0, 1000.0]
    uneven = Settings("krr", (1.0, 2.0, 3.0, 4.0, 10.0), unit="m")
    assert uneven.epsilon_text() == "5 values from 1 to 10 per m"
    assert Settings("krr", (1.0, 2.0)).epsilon_text() == "1, 2 per unit of distance"
    assert "target" not in Settings("krr", 1.0).text()
