"""``metricdp experiment utility|scalability|ablation --datasets FILE``: POINTS files as data.

A tiny POINTS CSV (as ``metricdp data vec`` / ``data geolife`` write) runs every quick
mode through the CLI; the records and cache keys carry the file's content hash, so a
changed file under the same path is recomputed; bad tokens and too-large sizes are one
clear error.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner, Result

from metricdp.cli.paper_experiments import register
from metricdp.experiments import _records as rs
from tests.cli_helpers import assert_one_line_error, make_app
from tests.helpers import needs


def _app() -> typer.Typer:
    return make_app(register, "experiment")


def _invoke(*args: object) -> Result:
    return CliRunner().invoke(_app(), ["experiment", *map(str, args)])


def _write_points(path: Path, n: int = 24, seed: int = 3) -> Path:
    """``label,x1,x2,x3``: n Euclidean points (the layout of ``metricdp data vec``)."""
    pts = np.random.default_rng(seed).standard_normal((n, 3))
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["label", "x1", "x2", "x3"])
        w.writerows([f"w{i}", *map(repr, map(float, row))] for i, row in enumerate(pts))
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def points(tmp_path: Path) -> Path:
    return _write_points(tmp_path / "vocab-24.csv")


def test_first_n_points_of_a_file(points: Path) -> None:
    space = rs.dataset_space(str(points), 12, seed=5)
    assert space.labels == tuple(f"w{i}" for i in range(12))  # the first n rows, whatever the seed
    assert space.labels == rs.dataset_space(str(points), 12, seed=0).labels
    assert rs.dataset_space(str(points), 24).n == 24
    assert rs.has_embedding(str(points)) and rs.dataset_metric(str(points)) == "euclidean"
    assert rs.dataset_slug(str(points)) == "vocab-24"


@needs("plot")
def test_utility_quick_on_a_file(points: Path, tmp_path: Path) -> None:
    out = tmp_path / "u"
    res = _invoke("utility", "--quick", "--out", out, "--datasets", points, "--sizes", "12",
                  "--mechanisms", "madlib,exponential", "--points", "2")
    assert res.exit_code == 0, res.output
    rows = _rows(out / "utility.csv")
    assert {r["dataset"] for r in rows} == {str(points)}
    assert {r["dataset_sha256"] for r in rows} == {_sha(points)}
    assert {"Madlib", "EM", "lower bound", "uniform"} <= {r["mechanism"] for r in rows}  # Euclidean: Madlib runs
    assert all(r["status"] == "ok" for r in rows), rows
    assert (out / "utility_vocab-24_12.png").read_bytes()[:4] == b"\x89PNG"
    assert f"## {points}, n = 12" in res.stdout


@needs("plot")
def test_utility_on_a_distance_matrix_has_no_madlib(points: Path, tmp_path: Path) -> None:
    npy = tmp_path / "d.npy"
    np.save(npy, np.asarray(rs.dataset_space(str(points), 12).distances))
    out = tmp_path / "u"
    res = _invoke("utility", "--quick", "--out", out, "--datasets", npy, "--sizes", "12",
                  "--mechanisms", "madlib,exponential", "--points", "1")
    assert res.exit_code == 0, res.output
    labels = {r["mechanism"] for r in _rows(out / "utility.csv")}
    assert "EM" in labels and "Madlib" not in labels  # no coordinates to add noise to


@pytest.mark.slow
@needs("plot")
def test_scalability_quick_on_a_file_has_the_exponential_row(points: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    res = _invoke("scalability", "--quick", "--out", out, "--datasets", points, "--sizes", "12")
    assert res.exit_code == 0, res.output
    rows = _rows(out / "scalability.csv")
    assert [r["mechanism"] for r in rows] == ["ConstOPTMech (r=5)", "ConstOPTMech (r=10)", "SpannerMech",
                                             "OPTMech", "EM"]
    em = rows[-1]
    assert em["status"] == "ok" and em["converged"] == "True" and em["nonzeros"] == ""
    assert em["dataset"] == str(points) and em["dataset_sha256"] == _sha(points)
    assert float(em["target_eps_tight"]) == 1.0  # a Euclidean file takes text's target
    assert abs(float(em["eps_tight"]) - 1.0) <= 1e-2
    assert "/ no LP" in res.stdout
    assert (out / "scalability_vocab-24.png").is_file()


@pytest.mark.slow
@needs("plot")
def test_scalability_lat_lon_file_takes_the_geo_target(tmp_path: Path) -> None:
    path = tmp_path / "cells.csv"
    lat = (39.9 + 0.005 * (np.arange(12) % 6)).tolist()
    lon = (116.4 + 0.005 * (np.arange(12) // 6)).tolist()
    cells = "".join(f"c{i},{a!r},{o!r}\n" for i, (a, o) in enumerate(zip(lat, lon, strict=True)))
    path.write_text("label,lat,lon\n" + cells, encoding="utf-8")
    out = tmp_path / "s"
    res = _invoke("scalability", "--quick", "--out", out, "--datasets", path, "--sizes", "12",
                  "--mechanisms", "exponential")
    assert res.exit_code == 0, res.output
    (row,) = _rows(out / "scalability.csv")
    assert float(row["target_eps_tight"]) == 0.3 and row["status"] == "ok"


@pytest.mark.slow
@needs("plot")
def test_ablation_quick_on_a_file(points: Path, tmp_path: Path) -> None:
    out = tmp_path / "a"
    res = _invoke("ablation", "--quick", "--out", out, "--datasets", points, "--eps-tight", "1")
    assert res.exit_code == 0, res.output
    rows = _rows(out / "ablation.csv")
    assert rows and all(r["status"] == "ok" for r in rows), rows
    assert {r["dataset"] for r in rows} == {str(points)} and {r["dataset_sha256"] for r in rows} == {_sha(points)}
    assert {r["n"] for r in rows} == {"20"}


@pytest.mark.slow
@needs("plot")
def test_changed_file_is_not_read_from_the_cache(points: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    args = ("scalability", "--quick", "--out", out, "--datasets", points, "--sizes", "12",
            "--mechanisms", "exponential")
    assert _invoke(*args).exit_code == 0
    cache = out / "scalability.jsonl"
    first = cache.read_text(encoding="utf-8").splitlines()
    assert len(first) == 1
    assert _invoke(*args).exit_code == 0  # unchanged file: resumed from the cache
    assert len(cache.read_text(encoding="utf-8").splitlines()) == 1
    before = _rows(out / "scalability.csv")[0]
    _write_points(points, seed=4)  # same path, same size, other points
    assert _invoke(*args).exit_code == 0
    lines = cache.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2  # recomputed, not mixed with the old file's result
    keys = [json.loads(line)["key"] for line in lines]
    assert keys[0] != keys[1] and _sha(points) in keys[1]
    after = _rows(out / "scalability.csv")[0]
    assert after["dataset_sha256"] == _sha(points) != before["dataset_sha256"]
    assert after["loss_q"] != before["loss_q"]


def test_size_larger_than_the_file_is_one_error(points: Path, tmp_path: Path) -> None:
    res = _invoke("scalability", "--quick", "--out", tmp_path / "s", "--datasets", points, "--sizes", "12,30")
    assert_one_line_error(res, str(points), "has 24 points", "n = 30")
    assert not (tmp_path / "s").exists()
    res = _invoke("ablation", "--out", tmp_path / "a", "--dataset", points)  # full mode: n = 200
    assert_one_line_error(res, "has 24 points", "n = 200")


def test_unknown_name_lists_the_built_in_datasets(points: Path, tmp_path: Path) -> None:
    res = _invoke("utility", "--quick", "--out", tmp_path / "u", "--datasets", f"text,mars,{points}")
    assert_one_line_error(res, "'mars'", "text, geo, gaussian", "POINTS file")
    res = _invoke("ablation", "--quick", "--out", tmp_path / "a", "--datasets", f"text,{points}")
    assert_one_line_error(res, "one dataset")
    other = tmp_path / "x.txt"
    other.write_text("label,x\n", encoding="utf-8")
    res = _invoke("scalability", "--quick", "--out", tmp_path / "s", "--datasets", other)
    assert_one_line_error(res, ".csv, .parquet/.pq or .npy, got .txt")


def test_first_n_rows_of_a_sampled_vocabulary_are_the_size_n_sample() -> None:
    """Why a file gives its first n points: the paper's vocabulary grown to N words from a
    seed starts with the vocabulary grown to n words from that seed (``data vec`` writes
    words in the order they were added)."""
    from metricdp.data.embeddings import Embeddings
    from metricdp.data.glove import vocabulary_space

    words = tuple("".join(chr(97 + (i // 26**k) % 26) for k in range(3)) for i in range(200))
    emb = Embeddings(words, np.random.default_rng(7).standard_normal((200, 4)))
    big = vocabulary_space(emb, 40, seed=2, pool=200, neighbours=5)
    small = vocabulary_space(emb, 15, seed=2, pool=200, neighbours=5)
    assert small.labels == big.labels[:15]
    assert big.labels != vocabulary_space(emb, 40, seed=3, pool=200, neighbours=5).labels


@pytest.mark.slow
@needs("plot")
def test_same_file_under_another_spelling_resumes(points: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "s"
    args = ("scalability", "--quick", "--out", out, "--sizes", "12", "--mechanisms", "exponential")
    assert _invoke(*args, "--datasets", points).exit_code == 0
    monkeypatch.chdir(points.parent)
    res = _invoke(*args, "--datasets", points.name)
    assert res.exit_code == 0, res.output
    assert len((out / "scalability.jsonl").read_text(encoding="utf-8").splitlines()) == 1  # not rebuilt
    (row,) = _rows(out / "scalability.csv")
    assert row["dataset"] == points.name and row["status"] == "ok"
    assert f"## {points.name}, eps_tight = 1" in res.stdout
