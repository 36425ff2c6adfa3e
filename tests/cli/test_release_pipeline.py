"""The release pipeline's catalogue of hostile cases, each through the CLI.

Each case either ends in ONE ``error:`` line, exit 2 and no output file (nor a temporary
file beside it), or in a correct release. The CSV shapes through all three engines are in
``tests/integrations/test_hostile_engines.py`` (one error or a correct release row for row,
with output labels disjoint from the inputs); the mutational fuzzers of every reader in
``tests/test_fuzz_readers.py`` and ``tests/tabular/``. This module holds the rest of the
report: true values around the mechanism, outputs over inputs, memory, tracebacks, the
first run and the Python API.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.mechanisms import registry
from tests.cli_helpers import assert_one_line_error, run


def _only(directory: Path, *names: str) -> None:
    """The directory holds exactly ``names`` (no output, no temporary file left)."""
    assert sorted(p.name for p in directory.iterdir()) == sorted(names)


@pytest.fixture
def checkins(tmp_path: Path) -> tuple[Path, Path]:
    """README's example: the check-ins and the exponential mechanism on the capitals."""
    assert run("example", "europe-capitals", "--out", tmp_path / "capitals.csv").exit_code == 0
    assert run("build", tmp_path / "capitals.csv", "--mechanism", "exponential", "--epsilon", "0.01",
               "--out", tmp_path / "em.npz").exit_code == 0
    assert run("example", "checkins", "--out", tmp_path / "checkins.csv").exit_code == 0
    return tmp_path / "em.npz", tmp_path / "checkins.csv"


def test_readme_example_names_what_leaves_and_drops_the_coordinates(checkins, tmp_path):
    em, data = checkins
    # each check-in's lat/lon sit around its city's centre: they tell the true cities apart
    refused = run("privatize", em, data, "--column", "city", "--out", tmp_path / "leak.csv")
    assert_one_line_error(refused, "column 'lat' is a code for the released column's true values ('city')",
                          "--drop it, or --keep it on purpose")
    assert not (tmp_path / "leak.csv").exists()
    kept = run("privatize", em, data, "--column", "city", "--keep", "lat", "--keep", "lon", "--out",
               tmp_path / "kept.csv", "--json")
    assert kept.exit_code == 0, kept.output
    report = json.loads(kept.stdout)
    assert {"lat", "lon"} <= set(json.dumps(report).replace('"', " ").split())  # named as leaving unreleased
    dropped = run("privatize", em, data, "--column", "city", "--drop", "lat", "--drop", "lon",
                  "--out", tmp_path / "released.csv")
    assert dropped.exit_code == 0, dropped.output
    header = next(csv.reader(io.StringIO((tmp_path / "released.csv").read_text())))
    assert "lat" not in header and "lon" not in header and "city" in header


def test_a_second_coordinate_pair_is_refused(tmp_path):
    src = tmp_path / "gps.csv"
    src.write_text("lat,lon,lat,lon\n48.85,2.35,48.86,2.36\n")
    result = run("privatize-points", src, "--lat", "lat", "--lon", "lon", "--epsilon", "1",
                 "--out", tmp_path / "out.csv")
    assert_one_line_error(result)
    _only(tmp_path, "gps.csv")


@pytest.mark.parametrize("shape", [b"city\rParis\rRome\r", b"city\nParis,\nRome,\n", b"city\n\x00Paris\n"])
def test_csv_shapes_that_readers_disagree_on_are_one_error(checkins, tmp_path, shape):
    em, _ = checkins
    src = tmp_path / "in.csv"
    src.write_bytes(shape)
    assert_one_line_error(run("privatize", em, src, "--column", "city", "--out", tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists()


def test_out_may_be_none_of_the_inputs(checkins, tmp_path):
    em, data = checkins
    released = tmp_path / "released.csv"
    assert run("privatize", em, data, "--column", "city", "--drop", "lat", "--drop", "lon",
               "--out", released).exit_code == 0
    before = data.read_bytes()
    for target in (data, em):  # the --true file and the mechanism, by path
        result = run("estimate", em, released, "--column", "city", "--true", data, "--true-column", "city",
                     "--out", target)
        assert_one_line_error(result)
    link = tmp_path / "link.csv"
    os.link(data, link)  # the same inode under another name
    assert_one_line_error(run("estimate", em, released, "--column", "city", "--true", data,
                              "--true-column", "city", "--out", link))
    sym = tmp_path / "sym.csv"
    sym.symlink_to(released)
    assert_one_line_error(run("estimate", em, released, "--column", "city", "--out", sym))
    assert data.read_bytes() == before


def test_an_oversized_npz_member_is_refused_before_allocation(checkins, tmp_path, monkeypatch):
    em, data = checkins
    hostile = tmp_path / "hostile.npz"
    import zipfile

    with zipfile.ZipFile(em) as zin, zipfile.ZipFile(hostile, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item, zin.read(item.filename))
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                      "shape": (20000, 20000)})
        zout.writestr("extra.npy", header.getvalue() + b"\0" * 64)
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100MiB")
    import tracemalloc

    tracemalloc.start()
    try:
        evaluated = run("evaluate", hostile)
        released = run("privatize", hostile, data, "--column", "city", "--drop", "lat", "--drop", "lon",
                       "--out", tmp_path / "o.csv")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the member is not one of the vetted names: never opened (3.2 GB were allocated before)
    assert evaluated.exit_code == 0 and released.exit_code == 0, evaluated.output + released.output
    assert peak < 64 * 2**20


@pytest.mark.parametrize("value", ["8GiB", "100MiB", "2GB", "123456789"])
def test_the_memory_limit_reads_readmes_units(value, monkeypatch):
    from metricdp._resources import memory_limit

    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", value)
    assert memory_limit() > 0


def test_a_record_over_the_cap_is_one_error(checkins, tmp_path, monkeypatch):
    em, _ = checkins
    src = tmp_path / "big.csv"
    src.write_bytes(b"city,note\nParis," + b"x" * (2 * 2**20) + b"\n")
    monkeypatch.setenv("METRICDP_CSV_MAX_RECORD", "1MiB")
    assert_one_line_error(run("privatize", em, src, "--column", "city", "--out", tmp_path / "out.csv"))
    _only(tmp_path, *sorted(p.name for p in tmp_path.iterdir()))
    assert not (tmp_path / "out.csv").exists()


def test_former_tracebacks_are_one_line(tmp_path):
    grid = tmp_path / "grid.csv"
    grid.write_text("label,x,y\na,0,0\nb,1,0\nc,0,1\nd,1,1\n")
    # the report of this grid's exponential mechanism (a symmetric space: equal losses) was one of them: the same
    # commands, and its four figures, are tests/test_hostile_inputs.py::test_report_on_a_symmetric_space[euclidean]
    madlib = run("build", grid, "--mechanism", "madlib", "--epsilon", "1", "--samples", str(10**12),
                 "--out", tmp_path / "m.npz")
    assert_one_line_error(madlib)
    vec = tmp_path / "huge.vec"
    vec.write_text("3 100000000000\nthe 0.1 0.2\n")
    result = run("text", "privatize", grid, "--mechanism", "exponential", "--epsilon", "1", "--embeddings", vec,
                 "--out", tmp_path / "t.txt")
    assert_one_line_error(result)


def test_audited_matrices_cannot_be_made_writable():
    space = MetricSpace.from_points([[0.0], [1.0], [3.0]])
    mech = registry.build("exponential", space, 1.0)
    for array in (mech.matrix, mech.matrix.base):
        if array is None:
            continue
        with pytest.raises(ValueError):
            array.setflags(write=True)
