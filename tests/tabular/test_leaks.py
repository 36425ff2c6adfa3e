"""What leaves, by name and by content (metricdp.tabular.leaks): each known leak refused, by hand."""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.frames import PrivatizeTransformer, privatize_frame
from metricdp.mechanisms.krr import krr
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.spaces import MetricSpace
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file
from metricdp.tabular.leaks import LeakRule, check_rows
from metricdp.text.rewrite import Vocabulary, rewrite_file

pd = pytest.importorskip("pandas")

LABELS = ["paris", "london", "rome"]
CITY = krr(MetricSpace.grid(1, 3, labels=LABELS), ldp_epsilon=1.0)
AGES = number_mechanism(NumericGrid(0, 99, 1), 0.5)  # scale max(1, 1/0.5) = 2


def _shift(pts: np.ndarray, _row: int) -> np.ndarray:
    return pts + 0.5  # ~55 km away: never within the 2 km scale of eps = 1/km


def _points_csv(path: Path, extra: dict[str, list[str]]) -> Path:
    lat = [48.1 + 0.01 * i for i in range(40)]
    lon = [11.5 + 0.02 * i for i in range(40)]
    frame = pd.DataFrame({"id": [f"u{i}" for i in range(40)], "lat": lat, "lon": lon})
    for name, make in extra.items():
        frame[name] = [make.format(lat=a, lon=b) for a, b in zip(lat, lon, strict=True)]  # type: ignore[attr-defined]
    frame.to_csv(path, index=False)
    return path


# ------------------------------------------------------------------------------ points
@pytest.mark.parametrize("name, cell", [
    ("latlng", "{lat},{lon}"), ("coordinates", "[{lat}, {lon}]"), ("geom", "POINT({lon} {lat})"),
    ("position", "{lat} {lon}"), ("breite", "{lat}"), ("laenge", "{lon}"), ("latitud", "{lat}"),
    ("longitud", "{lon}"), ("l\u0430t2", "{lat}"), ("shape", '{{"type": "Point", "coordinates": [{lon}, {lat}]}}'),
    ("c", "{lon};{lat}"), ("where", "{lat:.3f}"),
])
def test_a_second_coordinate_column_is_refused(tmp_path: Path, name: str, cell: str) -> None:
    src, out = _points_csv(tmp_path / "in.csv", {name: cell}), tmp_path / "out.csv"
    with pytest.raises(ValidationError, match=name) as ex:
        privatize_points_file(src, "lat", "lon", out, _shift, epsilon=1.0)
    assert str(src) in str(ex.value) and "\n" not in str(ex.value)
    assert not out.exists()


def test_content_refusal_names_file_line_and_how_to_keep(tmp_path: Path) -> None:
    src, out = _points_csv(tmp_path / "in.csv", {"c": "{lat},{lon}"}), tmp_path / "out.csv"
    with pytest.raises(ValidationError) as ex:
        privatize_points_file(src, "lat", "lon", out, _shift, epsilon=1.0)
    msg = str(ex.value)
    assert "column 'c'" in msg and "within 2 km" in msg and "first at line 2" in msg and "keep it on purpose" in msg


def test_a_kept_coordinate_column_is_written_and_reported(tmp_path: Path) -> None:
    src, out = _points_csv(tmp_path / "in.csv", {"latlng": "{lat},{lon}"}), tmp_path / "out.csv"
    stats = privatize_points_file(src, "lat", "lon", out, _shift, epsilon=1.0, keep=["latlng"])
    assert stats.columns.kept == ("latlng",) and out.exists()
    back = pd.read_csv(out)
    assert back["latlng"].tolist() == pd.read_csv(src)["latlng"].tolist()


def test_far_coordinates_under_another_name_pass(tmp_path: Path) -> None:
    src, out = _points_csv(tmp_path / "in.csv", {"c": "{lon},{lon}"}), tmp_path / "out.csv"  # not the point
    privatize_points_file(src, "lat", "lon", out, _shift, epsilon=1.0)
    assert out.exists()


def test_parquet_points_copy_refused_by_data_row(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    csv = _points_csv(tmp_path / "in.csv", {"c": "POINT({lon} {lat})"})
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pd.read_csv(csv).to_parquet(src)
    with pytest.raises(ValidationError, match=r"column 'c'.*first at data row 1"):
        privatize_points_file(src, "lat", "lon", out, _shift, epsilon=1.0)
    assert not out.exists()


# ------------------------------------------------------------------------------ labels, numbers, text
def test_a_copy_of_the_released_labels_is_refused_in_csv_and_parquet(tmp_path: Path) -> None:
    city = [LABELS[i % 3] for i in range(30)]
    frame = pd.DataFrame({"id": range(30), "city": city, "town": [c.upper() + " " for c in city]})
    for suffix in ("csv", "parquet"):
        src, out = tmp_path / f"in.{suffix}", tmp_path / f"out.{suffix}"
        frame.to_csv(src, index=False) if suffix == "csv" else frame.to_parquet(src)
        with pytest.raises(ValidationError, match="column 'town' holds the released column's true values"):
            privatize_file(CITY, src, "city", out)
        assert not out.exists()
        assert privatize_file(CITY, src, "city", out, keep=["town"]).columns.kept == ("town",)


def test_a_twin_spelt_with_a_cyrillic_letter_is_refused(tmp_path: Path) -> None:
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("city,\u0441ity\nparis,x\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="named like the released column"):
        privatize_file(CITY, src, "city", out)
    assert not out.exists()


def test_numbers_within_the_release_scale_are_refused(tmp_path: Path) -> None:
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    ids = [1000 + (17 * i) % 50 for i in range(50)]  # not in the order of the ages
    src.write_text("id,age,years\n" + "".join(f"{ids[i]},{i},{i + 1.5}\n" for i in range(50)))
    with pytest.raises(ValidationError, match=r"column 'years' holds numbers within 2 "):
        privatize_numbers_file(AGES, src, "age", out)
    assert not out.exists()
    src.write_text("id,age,years\n" + "".join(f"{ids[i]},{i},{(31 * i) % 50 + 3}\n" for i in range(50)))  # far
    privatize_numbers_file(AGES, src, "age", out)
    assert out.exists()


def test_a_copy_of_the_released_text_is_refused_in_csv_and_jsonl(tmp_path: Path) -> None:
    voc = Vocabulary(["cat", "dog", "paris", "the"])

    def shift(idx: np.ndarray) -> np.ndarray:
        return (idx + 1) % 4

    csv_in = tmp_path / "a.csv"
    csv_in.write_text('id,text,copy\n1,"cat, dog","cat, dog"\n2,Paris,paris\n', encoding="utf-8")
    with pytest.raises(ValidationError, match="column 'copy' holds the released column's true text"):
        rewrite_file(csv_in, tmp_path / "o.csv", voc, shift, column="text")
    assert not (tmp_path / "o.csv").exists()
    rewrite_file(csv_in, tmp_path / "o.csv", voc, shift, column="text", keep_columns=["copy"])
    jl = tmp_path / "a.jsonl"
    jl.write_text("".join(json.dumps({"id": i, "text": "the cat", "raw": "The cat"}) + "\n" for i in range(3)))
    with pytest.raises(ValidationError, match=r"column 'raw'.*first at line 1"):
        rewrite_file(jl, tmp_path / "o.jsonl", voc, shift, column="text")
    assert not (tmp_path / "o.jsonl").exists()


def test_a_constant_beside_varied_truths_is_not_a_copy() -> None:
    rule = LeakRule("numbers", ("age",), 100.0)  # eps = 0.01 per year: a wide scale
    truths = [(20,), (35,), (60,)]
    check_rows(rule, truths, {"country": [49, 49, 49]}, [1, 2, 3], "f")
    with pytest.raises(ValidationError, match="column 'kids'"):
        check_rows(rule, truths, {"kids": [0, 2, 1]}, [1, 2, 3], "f")  # varies: within the scale, refused
    with pytest.raises(ValidationError, match="column 'copy'"):  # one row, or one true value: a copy is a copy
        check_rows(LeakRule.labels("city"), [("rome",)], {"copy": ["Rome"]}, [1], "f")


def test_most_rows_not_any_row() -> None:
    rule = LeakRule.labels("smoker")
    truths = [("yes",), ("no",), ("yes",), ("no",)]
    check_rows(rule, truths, {"consent": ["yes", "yes", "no", "no"]}, [1, 2, 3, 4], "f")  # 2 of 4: chance
    with pytest.raises(ValidationError, match="3 of 4"):
        check_rows(rule, truths, {"consent": ["yes", "no", "yes", "yes"]}, [1, 2, 3, 4], "f")


# ------------------------------------------------------------------------------ engines (refused on the driver)
@pytest.mark.parametrize("engine", ["dask", "spark"])
def test_engines_refuse_before_any_worker_starts(tmp_path: Path, engine: str) -> None:
    from metricdp.integrations._points import privatize_points_engine
    from metricdp.integrations.numbers import privatize_numbers_engine
    from metricdp.location.release import PointSettings

    src, out = _points_csv(tmp_path / "in.csv", {"geom": "POINT({lon} {lat})"}), tmp_path / "out.csv"
    with pytest.raises(ValidationError, match="'geom'"):
        privatize_points_engine(engine, src, "lat", "lon", out, PointSettings(1.0, None))
    nums = tmp_path / "n.csv"
    nums.write_text("id,age,copy\n" + "".join(f"u{i},{i},{i}\n" for i in range(20)))
    with pytest.raises(ValidationError, match="column 'copy'"):
        privatize_numbers_engine(engine, AGES, nums, "age", out)
    cities = tmp_path / "c.csv"
    cities.write_text("city,town\n" + "".join(f"{LABELS[i % 3]},{LABELS[i % 3]}\n" for i in range(20)))
    if engine == "dask":
        from metricdp.integrations.dask import privatize_file_dask as release
    else:
        from metricdp.integrations.spark import privatize_file_spark as release
    with pytest.raises(ValidationError, match="column 'town'"):
        release(CITY, cities, "city", out)
    assert not out.exists()


# ------------------------------------------------------------------------------ DataFrames
def _people(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "city": [LABELS[i % 3] for i in range(n)]},
                        index=pd.Index([f"r{i}" for i in range(n)], name="key"))


def test_the_released_column_in_the_index_is_refused() -> None:
    df = _people().set_index("city")
    with pytest.raises(ValidationError, match="'city' is in the index"):
        privatize_frame(df, column="city", mechanism=CITY)


@pytest.mark.parametrize("names", [[None], ["home"], [None, None], ["key", None]])
def test_an_index_level_holding_the_released_values_is_refused(names: list[str | None]) -> None:
    df = _people()
    levels = [df["city"].to_numpy() if k == len(names) - 1 else df["id"].to_numpy() for k in range(len(names))]
    df.index = pd.MultiIndex.from_arrays(levels, names=names) if len(names) > 1 else pd.Index(levels[0],
                                                                                                 name=names[0])
    with pytest.raises(ValidationError, match="holds the released column's true values"):
        privatize_frame(df, column="city", mechanism=CITY)
    level = names[-1] or ("index" if len(names) == 1 else f"level_{len(names) - 1}")
    with pytest.warns(PrivacyLeakWarning):
        out, plan = privatize_frame(df, column="city", mechanism=CITY, keep=[level])
    assert level in plan.kept and out.index.equals(df.index)


def test_an_index_level_named_like_a_column_is_planned_apart() -> None:
    df = _people().set_index("id", drop=False)
    with pytest.warns(PrivacyLeakWarning, match=r"'id \(index\)', 'id'"):
        out, plan = privatize_frame(df, column="city", mechanism=CITY)
    assert plan.unacknowledged == ("id (index)", "id") and out.index.equals(df.index)
    out, plan = privatize_frame(df, column="city", mechanism=CITY, keep=["id"], drop=["id (index)"])
    assert plan.dropped == ("id (index)",) and isinstance(out.index, pd.RangeIndex)
    with pytest.raises(ValidationError, match=r"column 'city \(index\)' holds the released column's true values"):
        privatize_frame(_people().set_index("city", drop=False), column="city", mechanism=CITY)


def test_dataframe_warns_names_every_unnamed_column_and_drops_index_levels() -> None:
    df = _people()
    with pytest.warns(PrivacyLeakWarning, match=r"'key', 'id'"):
        privatize_frame(df, column="city", mechanism=CITY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, plan = privatize_frame(df, column="city", mechanism=CITY, keep=["id"], drop=["key"])
    assert plan.dropped == ("key",) and isinstance(out.index, pd.RangeIndex)


def test_dataframe_errors_name_index_labels() -> None:
    df = _people().assign(city=["paris"] * 39 + ["berlin"])
    with pytest.raises(ValidationError, match=r"first at row\(s\) 'r39'"):
        privatize_frame(df, column="city", mechanism=CITY, keep=["key", "id"])
    ages = pd.DataFrame({"age": [20] * 5 + [120]}, index=pd.Index([f"r{20130 + i}" for i in range(6)]))
    with pytest.raises(ValidationError, match=r"row 'r20135': '120'") as ex:
        privatize_frame(ages, column="age", mechanism=AGES, keep=["index"])
    assert "np." not in str(ex.value)
    gaps = pd.DataFrame({"age": [1.0, None]}, index=pd.Index(np.array([7, 20134], dtype=np.int64)))
    with pytest.raises(ValidationError, match=r"first: row 20134: 'null' \(empty\)"):
        privatize_frame(gaps, column="age", mechanism=AGES, keep=["index"])


def test_polars_lazyframe_and_copy() -> None:
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"city": [LABELS[i % 3] for i in range(9)], "town": [LABELS[i % 3] for i in range(9)]})
    with pytest.raises(ValidationError, match="LazyFrame"):
        privatize_frame(df.lazy(), column="city", mechanism=CITY)
    with pytest.raises(ValidationError, match=r"column 'town'.*first at row 0"):
        privatize_frame(df, column="city", mechanism=CITY)


def test_transformer_set_output() -> None:
    pl = pytest.importorskip("polars")
    df = _people().reset_index(drop=True)
    t = PrivatizeTransformer(CITY, column="city", keep=["id"])
    assert t.set_output(transform="polars") is t
    out = t.transform(df)
    assert isinstance(out, pl.DataFrame) and out.columns == ["id", "city"]
    back = t.set_output(transform="pandas").transform(pl.from_pandas(df))
    assert isinstance(back, pd.DataFrame) and back["id"].tolist() == df["id"].tolist()
    one = t.transform(np.array(["paris", "rome"], dtype=object))
    assert isinstance(one, pd.DataFrame) and list(one.columns) == ["city"]
    assert isinstance(t.set_output(transform="default").transform(df), pd.DataFrame)
    with pytest.raises(ValidationError, match="set_output"):
        t.set_output(transform="arrow")


def test_an_accounted_release_refused_spends_nothing(tmp_path: Path) -> None:
    from metricdp.accounting.ledger import Ledger
    from metricdp.streaming.accounted import Accounting

    src, out, led = tmp_path / "in.csv", tmp_path / "out.csv", tmp_path / "l.db"
    src.write_text("user,city,town\n" + "".join(f"u{i % 4},{LABELS[i % 3]},{LABELS[i % 3]}\n" for i in range(24)))
    with Ledger(led, budget=10.0):
        pass
    before = led.read_bytes()
    for one_pass in (True, False):
        with Ledger(led) as book, pytest.raises(ValidationError, match="column 'town'"):
            privatize_file(CITY, src, "city", out, keep=["user"], accounting=Accounting("user", ledger=book),
                           one_pass=one_pass)
    assert led.read_bytes() == before and not out.exists()
    with Ledger(led) as book:  # the same release with the copy kept on purpose spends
        privatize_file(CITY, src, "city", out, keep=["user", "town"], accounting=Accounting("user", ledger=book))
    assert led.read_bytes() != before and out.exists()


def test_an_affine_re_encoding_of_the_truth_is_refused(tmp_path: Path) -> None:
    """Radians, millidegrees, months, a row number of a sorted file: far from the truth, yet the truth."""
    lat = [48.8 + 0.005 * ((7 * i) % 40) for i in range(40)]
    lon = [2.3 + 0.004 * ((11 * i) % 40) for i in range(40)]
    truths = list(zip(lat, lon, strict=True))
    rule = LeakRule.points("lat", "lon", 1.0)
    for name, column in [("rad", [np.radians(a) for a in lat]), ("milli", [1000 * b for b in lon]),
                         ("north_m", [f"{(a - 48.8) * 111_320:.0f}" for a in lat])]:
        with pytest.raises(ValidationError, match=f"column '{name}' is an affine re-encoding"):
            check_rows(rule, truths, {name: column}, list(range(2, 42)), "f")
    ages = [(i * 13) % 90 for i in range(40)]
    with pytest.raises(ValidationError, match=r"'months' is an affine re-encoding .* \('age'\)"):
        check_rows(LeakRule("numbers", ("age",), 2.0), [(a,) for a in ages], {"months": [12 * a for a in ages]},
                   list(range(40)), "f")
    check_rows(LeakRule("numbers", ("age",), 2.0), [(a,) for a in ages], {"id": [(a * 37) % 41 for a in ages]},
               list(range(40)), "f")  # unrelated numbers: the fit is no better than the mean
    check_rows(LeakRule("numbers", ("age",), 2.0), [(a,) for a in ages[:9]], {"months": [12 * a for a in ages[:9]]},
               list(range(9)), "f")  # fewer rows than MIN_FIT: two numbers fit any few rows
    check_rows(LeakRule("numbers", ("age",), 100.0), [(a,) for a in ages], {"months": [12 * a for a in ages]},
               list(range(40)), "f")  # every age within the scale of the mean: the column adds nothing


def test_a_code_of_the_released_labels_is_refused() -> None:
    """A function of the true label (a code, a one-hot flag) carries it; a person's id does not."""
    rule = LeakRule.labels("city")
    cities = [LABELS[i % 3] for i in range(30)]
    truths = [(c,) for c in cities]
    rows = list(range(30))
    codes = [("code", [LABELS.index(c) for c in cities]), ("is_paris", [int(c == "paris") for c in cities])]
    for name, column in codes:
        with pytest.raises(ValidationError, match=f"column '{name}' is a code for the released column's true values"):
            check_rows(rule, truths, {name: column}, rows, "f")
    check_rows(rule, truths, {"user": [f"u{i % 6}" for i in range(30)]}, rows, "f")  # a person in one city
    check_rows(rule, truths, {"flag": [i % 2 for i in range(30)]}, rows, "f")  # unrelated
    check_rows(rule, truths[:9], {"code": [LABELS.index(c) for c in cities[:9]]}, rows[:9], "f")  # too few rows


@pytest.mark.parametrize("copy", [b"paris", ["paris"], {"name": "paris"}, "pa\u200bris", "PARIS\u00ad"])
def test_a_copy_in_bytes_a_list_or_with_invisible_characters_is_refused(copy: object) -> None:
    with pytest.raises(ValidationError, match="column 'c' holds the released column's true values"):
        check_rows(LeakRule.labels("city"), [("paris",)], {"c": [copy]}, [1], "f")


def test_numbers_clustered_by_the_released_labels_are_refused() -> None:
    """Each city's coordinates, jittered: not equal per label, yet they tell the labels apart."""
    rule = LeakRule.labels("city")
    centre = {"paris": 48.86, "london": 51.51, "rome": 41.90}
    cities = [LABELS[(7 * i) % 3] for i in range(30)]
    jitter = [0.01 * ((5 * i) % 7 - 3) for i in range(30)]
    truths = [(c,) for c in cities]
    with pytest.raises(ValidationError, match=r"column 'lat' is a code .* tell them apart in 30 of 30"):
        check_rows(rule, truths, {"lat": [centre[c] + j for c, j in zip(cities, jitter, strict=True)]},
                   list(range(30)), "f")
    check_rows(rule, truths, {"temp": [centre[c] / 10 + 3 * j * 100 for c, j in zip(cities, jitter, strict=True)]},
               list(range(30)), "f")  # related to the city, but mostly its own noise


# ------------------------------------------------------------------------------ the check's own costs
def _slow_key(text: str) -> str:
    import unicodedata

    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf").casefold().strip()


def test_ascii_is_its_own_normal_form_without_format_characters() -> None:
    import unicodedata

    from metricdp.tabular.leaks import value_key

    for code in range(128):
        ch = chr(code)
        assert unicodedata.normalize("NFKC", ch) == ch and unicodedata.category(ch) != "Cf"
        assert value_key(f" Pa{ch}RIS ") == _slow_key(f" Pa{ch}RIS ")
    assert value_key("pa\u200bris") == value_key("PA\uff32IS") == "paris"  # not ASCII: normalised


def test_check_chunk_reads_each_column_once_and_names_the_row_of_a_later_block() -> None:
    pa = pytest.importorskip("pyarrow")
    from metricdp.tabular.formats import BatchChunk
    from metricdp.tabular.leaks import SCAN_ROWS, check_chunk

    reads: list[str] = []

    class Counted(BatchChunk):
        def values(self, name, rows):  # type: ignore[no-untyped-def]
            reads.append(name)
            return super().values(name, rows)

    n = 2 * SCAN_ROWS + 10
    city = [LABELS[i % 3] for i in range(n)]
    copy = ["x"] * SCAN_ROWS + city[SCAN_ROWS:]  # the true labels from the second block on
    chunk = Counted(pa.record_batch({"city": city, "copy": copy}), 100)
    with pytest.raises(ValidationError, match=f"column 'copy' holds .* first at data row {100 + SCAN_ROWS + 1},"):
        check_chunk(LeakRule.labels("city"), chunk, ["copy"], "f")
    assert sorted(reads) == ["city", "copy"]


def _float_or_none(text: str) -> float | None:
    """What a number column holds, by float() itself: a finite float of the stripped text of at most 64 characters."""
    import math

    text = text.strip()
    if not text or len(text) > 64:
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


@pytest.mark.parametrize("text", [".5", "+.5", "-inf", "nan", "Infinity", "1_000", " 7 ", "\u0661", "\uff11.5", "e5",
                                  "p1", "+-1", ""])
def test_a_text_is_a_number_exactly_when_float_reads_it(text: str) -> None:
    """The screen before float() (an ASCII text starting with no digit, point, inf or nan) drops no number."""
    from metricdp.tabular.leaks import _number

    assert _number(text) == _float_or_none(text)


@given(st.text(alphabet=st.sampled_from("0123456789.eE+-_ \tinfINFaApx\u0661\uff11"), max_size=8))
def test_any_short_text_is_a_number_exactly_when_float_reads_it(text: str) -> None:
    test_a_text_is_a_number_exactly_when_float_reads_it(text)


def test_equal_texts_share_a_reading_and_other_types_do_not() -> None:
    """1, 1.0 and True are one key of a dict, yet three different texts: a copy of each is caught."""
    rule = LeakRule.labels("code")
    with pytest.raises(ValidationError, match="3 of 3"):
        check_rows(rule, [("1",), ("1.0",), ("true",)], {"c": [1, 1.0, True]}, [1, 2, 3], "f")
    check_rows(rule, [("1",), ("1.0",), ("true",)], {"c": [True, 1, 1.0]}, [1, 2, 3], "f")  # none equal


@pytest.mark.parametrize("n", [0, 1, 511, 512, 513, 1000, 65_536, 65_537, 10**7 + 3])
def test_spread_is_every_row_or_the_even_positions_rounded_down(n: int) -> None:
    from metricdp.tabular.leaks import SAMPLE, spread

    want = list(range(n)) if n <= SAMPLE else sorted({int(i) for i in np.linspace(0, n - 1, SAMPLE)})
    got = spread(n)
    assert got == want and all(type(i) is int for i in got)


def _verdict(chunks: list[object]) -> str:
    from metricdp.tabular.leaks import ContentScan

    scan = ContentScan(LeakRule.labels("city"), ["copy"], "f")
    try:
        for chunk in chunks:
            scan.add(chunk)
        scan.finish()
    except ValidationError as ex:
        return str(ex)
    return "ok"


@pytest.mark.parametrize("copied", [(0, 30_000), (60_000, 90_000), (65_536, 131_072), (131_000, 131_082)])
def test_content_scan_blocks_count_from_the_files_first_row_whatever_the_chunks(copied: tuple[int, int]) -> None:
    pa = pytest.importorskip("pyarrow")
    from metricdp.tabular.formats import BatchChunk
    from metricdp.tabular.leaks import SCAN_ROWS

    n = 2 * SCAN_ROWS + 10  # the last block: 10 rows, all compared
    city = [LABELS[i % 3] for i in range(n)]
    copy = ["x"] * n
    copy[copied[0]:copied[1]] = city[copied[0]:copied[1]]
    batch = pa.record_batch({"city": city, "copy": copy})
    whole = _verdict([BatchChunk(batch, 0)])
    for cuts in ([30_000, 70_000], [SCAN_ROWS - 1], [1000 * k for k in range(1, 132)], [n - 5]):
        bounds = [0, *cuts, n]
        chunks = [BatchChunk(batch.slice(a, b - a), a) for a, b in itertools.pairwise(bounds)]
        assert _verdict(chunks) == whole, cuts
    refused = {(0, 30_000): False, (60_000, 90_000): False, (65_536, 131_072): True, (131_000, 131_082): True}
    assert (whole != "ok") is refused[copied], whole
