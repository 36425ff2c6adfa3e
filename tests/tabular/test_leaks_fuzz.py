"""A fuzzer of what leaves (metricdp.tabular.leaks) through every kind, format, engine and the DataFrame API.

Random layouts: the released column(s), then extra columns under random names (look-alike
letters, coordinate synonyms, plain names), each either a COPY of the released values in
some encoding (the same text in another case, a number within the release's scale, a
coordinate pair, WKT, GeoJSON) or BENIGN (values no release would confuse with the truth),
each kept on purpose or not; for DataFrames also random index layouts. ONE oracle, from the
layout alone: the release is refused -- one error line, no output file -- exactly when an
unkept copy (or a column the name rules name: a twin of a released name, a coordinate word
beside released coordinates) would leave; otherwise it is released row for row and every
copy in the output is one the user kept. ``METRICDP_FUZZ_EXAMPLES=N`` runs longer.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.frames import privatize_frame
from metricdp.mechanisms.krr import krr
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.spaces import MetricSpace
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file
from metricdp.tabular.formats import RELEASE_FORMATS
from metricdp.text.rewrite import Vocabulary, rewrite_file

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

EXAMPLES = int(os.environ.get("METRICDP_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])

LABELS = ["paris", "london", "rome", "oslo"]
CITY = krr(MetricSpace.grid(1, 4, labels=LABELS), ldp_epsilon=1.0)
AGES = number_mechanism(NumericGrid(0, 99, 1), 0.5)  # scale max(step 1, 1/eps 2) = 2
WORDS = ["the", "cat", "dog", "paris"]
EPS_KM = 1.0  # the points' scale: 2 km

#: Extra column names: (name, a twin of the released name, a coordinate word).
NAMES = {
    "labels": [("note", False, False), ("town", False, False), ("\u0441ity", True, False), ("CITY_", True, False),
               ("ci\u200bty", True, False), ("tag", False, False), ("v", False, False)],
    "numbers": [("note", False, False), ("years", False, False), ("\u0430ge", True, False), ("Age", True, False),
                ("v", False, False), ("w2", False, False)],
    "points": [("note", False, False), ("latlng", False, True), ("coordinates", False, True), ("geom", False, True),
               ("position", False, True), ("breite", False, True), ("laenge", False, True), ("latitud", False, True),
               ("longitud", False, True), ("l\u0430t", True, True), ("c", False, False), ("shape", False, False),
               ("v", False, False)],
    "text": [("note", False, False), ("raw", False, False), ("T\u0435xt", True, False), ("v", False, False)],
}
RELEASED = {"labels": ("city",), "numbers": ("age",), "points": ("lat", "lon"), "text": ("text",)}
POINT_CODES = ["{lat},{lon}", "{lat} {lon}", "[{lat}, {lon}]", "POINT({lon} {lat})",
               '{{"type": "Point", "coordinates": [{lon}, {lat}]}}', "{lat}", "{lon}", "{lon},{lat}"]


def _truth(kind: str, n: int, draw: Any) -> dict[str, list[Any]]:
    if kind == "labels":
        return {"city": [LABELS[k] for k in draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))]}
    if kind == "numbers":
        return {"age": draw(st.lists(st.integers(0, 99), min_size=n, max_size=n))}
    if kind == "points":
        lat = draw(st.lists(st.floats(40, 50).map(lambda x: round(x, 5)), min_size=n, max_size=n))
        lon = draw(st.lists(st.floats(0, 10).map(lambda x: round(x, 5)), min_size=n, max_size=n))
        return {"lat": lat, "lon": lon}
    return {"text": [" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))) for _ in range(n)]}


def _copy(kind: str, truth: dict[str, list[Any]], code: int) -> list[str]:
    """The released values in one of a few encodings, every one within the release's scale."""
    if kind in ("labels", "text"):
        col = truth[RELEASED[kind][0]]
        return [[v, v.upper(), f" {v} "][code % 3] for v in col]
    if kind == "numbers":
        return [[str(v), str(v + 1), f"{v}.0", str(v - 1.5)][code % 4] for v in truth["age"]]
    form = POINT_CODES[code % len(POINT_CODES)]
    return [form.format(lat=round(a + 0.001, 6), lon=round(b - 0.001, 6))
            for a, b in zip(truth["lat"], truth["lon"], strict=True)]


def _benign(kind: str, n: int, code: int) -> list[str]:
    """Values no rule reads as the truth: words outside every label, numbers far from every value."""
    if kind == "numbers":
        return [str(500 + 7 * i + code) for i in range(n)]
    if kind == "points":
        return [[f"zz{i}", str(-170.0 - i % 5), f"{-80 - i % 5},{-170}"][code % 3] for i in range(n)]
    return [f"q{code}x{i}" for i in range(n)]


@st.composite
def layouts(draw: Any, kind: str) -> dict[str, Any]:
    n = draw(st.integers(1, 24))
    truth = _truth(kind, n, draw)
    picks = draw(st.lists(st.sampled_from(NAMES[kind]), max_size=3, unique_by=lambda t: t[0]))
    extra, copies, named = {}, set(), set()
    for name, twin, coordinate in picks:
        code = draw(st.integers(0, 11))
        copy = draw(st.booleans())
        extra[name] = _copy(kind, truth, code) if copy else _benign(kind, n, code)
        if copy and len(set(extra[name])) == 1 and len(set(zip(*truth.values(), strict=True))) > 1:
            copy = False  # one value beside varied released values says nothing about any row (tabular.leaks)
        if copy:
            copies.add(name)
        if twin or (coordinate and kind == "points"):
            named.add(name)
    keep = {name for name in extra if draw(st.booleans())}
    position = draw(st.integers(0, len(extra)))
    columns = list(extra.items())
    columns[position:position] = list(truth.items())
    return {"n": n, "truth": truth, "columns": dict(columns), "copies": copies, "named": named, "keep": keep}


def _expect_refused(layout: dict[str, Any]) -> bool:
    return bool((layout["copies"] | layout["named"]) - layout["keep"])


def _write(layout: dict[str, Any], path: Path) -> None:
    frame = pd.DataFrame({k: pd.Series(v, dtype=object).astype(str) for k, v in layout["columns"].items()})
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    elif path.suffix in (".feather", ".arrow"):
        frame.to_feather(path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in frame.to_dict("records")),
                        encoding="utf-8")
    else:
        frame.to_csv(path, index=False)


def _read(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix in (".feather", ".arrow"):
        return pd.read_feather(path)
    if path.suffix == ".jsonl":
        return pd.DataFrame([json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()])
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _shift(pts: np.ndarray, _row: int) -> np.ndarray:
    return pts + 0.5


def _release(kind: str, src: Path, out: Path, keep: list[str], engine: str) -> None:
    if engine != "local":
        from metricdp.integrations._points import privatize_points_engine
        from metricdp.integrations.numbers import privatize_numbers_engine
        from metricdp.location.release import PointSettings

        if kind == "labels":
            from metricdp.integrations.dask import privatize_file_dask
            from metricdp.integrations.spark import privatize_file_spark

            (privatize_file_dask if engine == "dask" else privatize_file_spark)(CITY, src, "city", out, keep=keep)
        elif kind == "numbers":
            privatize_numbers_engine(engine, AGES, src, "age", out, keep=keep)
        else:
            privatize_points_engine(engine, src, "lat", "lon", out, PointSettings(EPS_KM, None), keep=keep)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        if kind == "labels":
            privatize_file(CITY, src, "city", out, keep=keep)
        elif kind == "numbers":
            privatize_numbers_file(AGES, src, "age", out, keep=keep)
        elif kind == "points":
            privatize_points_file(src, "lat", "lon", out, _shift, keep=keep, epsilon=EPS_KM)
        else:
            def shift(idx: np.ndarray) -> np.ndarray:
                return (idx + 1) % len(WORDS)

            rewrite_file(src, out, Vocabulary(WORDS), shift, column="text", keep_columns=keep)


def _oracle(layout: dict[str, Any], kind: str, src: Path, out: Path, engine: str = "local") -> None:
    keep = sorted(layout["keep"])
    try:
        _release(kind, src, out, keep, engine)
    except ValidationError as ex:
        assert _expect_refused(layout), f"refused without a leak: {ex}"
        assert "\n" not in str(ex) and not out.exists()
        return
    assert not _expect_refused(layout), f"released with {sorted(layout['copies'] - layout['keep'])} leaving"
    back = _read(out)
    assert len(back) == layout["n"]
    leaked = [c for c in back.columns if c in layout["copies"] and c not in layout["keep"]]
    assert not leaked


#: every format a release reads, for every kind (a format module added is fuzzed with no change here)
SUFFIX = {name: f.suffixes[0].lstrip(".") for name, f in RELEASE_FORMATS.items() if f.reads}
FORMATS = dict.fromkeys(["labels", "numbers", "points", "text"], sorted(SUFFIX.values()))


@pytest.mark.parametrize("kind", ["labels", "numbers", "points", "text"])
@FUZZ
@given(data=st.data())
def test_local_files_refuse_exactly_the_leaks(tmp_path_factory: Any, kind: str, data: Any) -> None:
    layout = data.draw(layouts(kind))
    fmt = data.draw(st.sampled_from(FORMATS[kind]))
    tmp = tmp_path_factory.mktemp("f")
    src, out = tmp / f"in.{fmt}", tmp / f"out.{fmt}"
    _write(layout, src)
    _oracle(layout, kind, src, out)


def _accounted(kind: str, src: Path, out: Path, keep: list[str], ledger: Any) -> None:
    from metricdp.streaming.accounted import Accounting

    acc = Accounting("user", ledger=ledger, policy="drop")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        if kind == "labels":
            privatize_file(CITY, src, "city", out, keep=keep, accounting=acc)
        elif kind == "numbers":
            privatize_numbers_file(AGES, src, "age", out, keep=keep, accounting=acc)
        else:
            privatize_points_file(src, "lat", "lon", out, _shift, keep=keep, epsilon=EPS_KM, accounting=acc)


@pytest.mark.parametrize("kind", ["labels", "numbers", "points"])
@FUZZ
@given(data=st.data())
def test_accounted_releases_refuse_the_leaks_with_nothing_spent(tmp_path_factory: Any, kind: str, data: Any) -> None:
    """The same oracle through the per-person accounting: a refusal also leaves every person's spend at 0 and no
    run in the ledger but aborted ones; a release spends."""
    from metricdp.accounting.ledger import Ledger

    layout = data.draw(layouts(kind))
    fmt = data.draw(st.sampled_from(FORMATS[kind]))
    layout["columns"]["user"] = [f"u{i % 3}" for i in range(layout["n"])]
    keep = sorted(layout["keep"] | {"user"})
    tmp = tmp_path_factory.mktemp("a")
    src, out = tmp / f"in.{fmt}", tmp / f"out.{fmt}"
    _write(layout, src)
    persons = sorted({f"u{i % 3}" for i in range(layout["n"])})
    with Ledger(tmp / "l.db", budget=1e6) as book:
        try:
            _accounted(kind, src, out, keep, book)
        except ValidationError as ex:
            assert _expect_refused(layout), f"refused without a leak: {ex}"
            assert "\n" not in str(ex) and not out.exists()
            assert book.spent(persons).tolist() == [0.0] * len(persons)
            assert all(r["state"] == "aborted" for r in book.runs_table())
            return
        assert not _expect_refused(layout), f"released with {sorted(layout['copies'] - layout['keep'])} leaving"
        assert (book.spent(persons) > 0).all()
    back = _read(out)
    assert len(back) == layout["n"]
    assert not [c for c in back.columns if c in layout["copies"] and c not in layout["keep"]]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dask", "spark"])
@pytest.mark.parametrize("kind", ["labels", "numbers", "points"])
@settings(max_examples=max(EXAMPLES // 5, 3), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_engines_refuse_exactly_the_leaks(tmp_path_factory: Any, engine: str, kind: str, data: Any) -> None:
    from tests.integrations.conftest import dask_unavailable, spark_unavailable

    reason = dask_unavailable if engine == "dask" else spark_unavailable
    if reason:
        pytest.skip(reason)
    layout = data.draw(layouts(kind))
    fmt = data.draw(st.sampled_from(["csv", "parquet"]))
    tmp = tmp_path_factory.mktemp("e")
    src, out = tmp / f"in.{fmt}", tmp / f"out.{fmt}"
    _write(layout, src)
    _oracle(layout, kind, src, out, engine)


# ------------------------------------------------------------------------------ DataFrames
INDEXES = ["range", "id", "copy", "named-copy", "multi"]


@FUZZ
@given(data=st.data())
def test_dataframes_refuse_exactly_the_leaks_in_columns_and_index(data: Any) -> None:
    kind = data.draw(st.sampled_from(["labels", "numbers"]))
    layout = data.draw(layouts(kind))
    column = RELEASED[kind][0]
    truth = layout["truth"][column]
    frame = pd.DataFrame({k: (v if k == column else pd.Series(v, dtype=object).astype(str))
                          for k, v in layout["columns"].items()})
    index = data.draw(st.sampled_from(INDEXES))
    levels: list[str] = []
    copy_values = [str(v) for v in truth]
    if index == "id":
        frame.index, levels = pd.Index([f"r{i}" for i in range(layout["n"])], name="rid"), ["rid"]
    elif index == "copy":
        frame.index, levels = pd.Index(copy_values), ["index"]
        layout["copies"].add("index")
    elif index == "named-copy":
        frame.index, levels = pd.Index(copy_values, name="where"), ["where"]
        layout["copies"].add("where")
    elif index == "multi":
        frame.index = pd.MultiIndex.from_arrays([[f"r{i}" for i in range(layout["n"])], copy_values])
        levels = ["level_0", "level_1"]
        layout["copies"].add("level_1")
    layout["keep"] |= {lv for lv in levels if data.draw(st.booleans())}
    mech = CITY if kind == "labels" else AGES
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out, plan = privatize_frame(frame, column=column, mechanism=mech, keep=sorted(layout["keep"]))
        except ValidationError as ex:
            assert _expect_refused(layout), f"refused without a leak: {ex}"
            assert "\n" not in str(ex) and "np." not in str(ex)
            return
    assert not _expect_refused(layout), f"released with {sorted(layout['copies'] - layout['keep'])} leaving"
    unnamed = set(plan.unacknowledged)
    assert unnamed == {c for c in [*levels, *layout["columns"]] if c != column} - layout["keep"]
    warned = [w for w in seen if issubclass(w.category, PrivacyLeakWarning)]
    assert bool(warned) == bool(unnamed) and all(repr(c) in str(warned[0].message) for c in unnamed)
    assert len(out) == layout["n"] and out.index.equals(frame.index)
