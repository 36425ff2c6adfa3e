"""Hostile Feather and JSON-lines files on the Dask and Spark engines, and the DataFrame functions' leak check.

Oracles: for a file, the local engine (the engine must refuse exactly what it refuses,
with the same one line and nothing written, and release exactly what it releases: byte
for byte for JSON lines, table for table for Feather, where the release is determined);
for a DataFrame, :func:`metricdp.frames.privatize_frame` on the same rows (a column it
refuses must be refused before the lazy frame is returned, an index level included).
Accounted runs: a refusal spends nothing. A finding that fails today is a strict xfail
whose reason says what happens.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp.accounting.ledger import Ledger
from metricdp.errors import ValidationError
from metricdp.frames import privatize_frame
from metricdp.integrations._points import privatize_points_engine
from metricdp.integrations.numbers import privatize_numbers_engine
from metricdp.streaming.accounted import Accounting
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file
from tests.cli_helpers import assert_one_line_error, run
from tests.integrations.conftest import dask_unavailable, spark_unavailable
from tests.integrations.test_formats_engines import AGES, SETTINGS, SURE

pa = pytest.importorskip("pyarrow")
pytestmark = pytest.mark.slow

W3 = "abc"


def _labels_engine(name: str) -> Callable[..., int]:
    if name == "dask":
        from metricdp.integrations.dask import privatize_file_dask

        return privatize_file_dask
    from metricdp.integrations.spark import privatize_file_spark

    return privatize_file_spark


def _outcome(release: Callable[[], Any], out: Path) -> tuple[str, Any]:
    """``("ok", output bytes)`` or ``("error", message)`` with nothing written (asserted)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release()
    except ValidationError as ex:
        assert not out.exists(), f"refused ({ex}) but {out} was written"
        return "error", str(ex)
    return "ok", out.read_bytes()


def _feather_table(data: bytes) -> Any:
    return pa.ipc.open_file(pa.BufferReader(data)).read_all()


def _agree(local: tuple[str, Any], eng: tuple[str, Any], feather: bool) -> None:
    assert local[0] == eng[0], (local, eng)
    if local[0] == "error" or not feather:
        assert local[1] == eng[1]
    else:
        a, b = _feather_table(local[1]), _feather_table(eng[1])
        assert a.equals(b) and a.schema.equals(b.schema, True)


def _labels_both(engine: Any, src: Path, tmp_path: Path, **kw: Any) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """The local engine's and the engine's labels release of ``src`` (column ``w``), small pieces."""
    name, where = engine
    local, out = tmp_path / f"local{src.suffix}", tmp_path / f"engine{src.suffix}"
    a = _outcome(lambda: privatize_file(SURE, src, "w", local, **kw), local)
    b = _outcome(lambda: _labels_engine(name)(SURE, src, "w", out, piece_bytes=60, **kw, **where), out)
    return a, b


# ------------------------------------------------------------------------------------------------ JSON lines
def _jl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _rows(n: int = 30) -> list[dict[str, Any]]:
    return [{"id": i, "w": W3[i % 3], "note": f"n{i}"} for i in range(n)]


HOSTILE_JSONL = {
    "bad_last_line": _jl(_rows()) + b'{"id": 99, "w": "a", "note": \n',
    "string_after_numbers": _jl(_rows(20)) + _jl([{"id": "x", "w": "a", "note": "n"}]) + _jl(_rows(5)),
    "boolean_after_numbers": _jl(_rows(20)) + b'{"id": true, "w": "a", "note": "n"}\n',
    "nested_object": _jl(_rows(20)) + _jl([{"id": 1, "w": "a", "note": {"x": 1}}]),
    "nested_released": _jl(_rows(20)) + _jl([{"id": 1, "w": ["a"], "note": "n"}]),
    "key_twice": _jl(_rows(20)) + b'{"id": 1, "w": "a", "w": "b", "note": "n"}\n',
    "missing_key": _jl(_rows(20)) + b'{"id": 1, "note": "n"}\n',
    "extra_key": _jl(_rows(20)) + b'{"id": 1, "w": "a", "note": "n", "w2": "a"}\n',
    "empty": b"",
    "blank_lines_only": b"\n\n  \n",
    "nul_in_string": _jl(_rows(10)) + b'{"id": 1, "w": "a\x00", "note": "n"}\n' + _jl(_rows(10)),
    "nul_after_object": _jl(_rows(10)) + b'{"id": 1, "w": "a", "note": "n"}\x00\n',
    "cr_only_line_breaks": _jl(_rows()).replace(b"\n", b"\r"),
    "bom_mid_file": _jl(_rows(10)) + b"\xef\xbb\xbf" + _jl(_rows(10)),
    "latin1": _jl(_rows(10)) + b'{"id": 1, "w": "a", "note": "caf\xe9"}\n',
    "lone_surrogate": _jl(_rows(10)) + b'{"id": 1, "w": "a", "note": "\\ud800"}\n',
    "integer_beyond_64_bits": _jl(_rows(10)) + b'{"id": 99999999999999999999, "w": "a", "note": "n"}\n',
    "nan": _jl(_rows(10)) + b'{"id": NaN, "w": "a", "note": "n"}\n',
    "array_line": _jl(_rows(10)) + b"[1, 2, 3]\n",
    "null_label_last": _jl(_rows(29)) + _jl([{"id": 1, "w": None, "note": "n"}]),
    "number_labels": _jl([{"id": i, "w": i % 3, "note": "n"} for i in range(20)]),
    "copy_upper_case": _jl([{"id": i, "w": W3[i % 3], "note": W3[i % 3].upper()} for i in range(30)]),
    "fullwidth_twin_name": _jl([{"id": i, "w": W3[i % 3], "\uff57": "x"} for i in range(30)]),
    "zero_width_twin_name": _jl([{"id": i, "w": W3[i % 3], "w\u200b": "x"} for i in range(30)]),
    "line_over_the_cap": _jl(_rows(5)) + json.dumps({"id": 1, "w": "a", "note": "x" * 5000}).encode() + b"\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_JSONL))
def test_hostile_jsonl_is_refused_as_the_local_engine_refuses_it(engine: Any, case: str, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(HOSTILE_JSONL[case])
    local, eng = _labels_both(engine, src, tmp_path, max_record=4096)
    assert local[0] == "error"
    _agree(local, eng, feather=False)


BENIGN_JSONL = {
    "bom": b"\xef\xbb\xbf" + _jl(_rows()),
    "crlf": _jl(_rows()).replace(b"\n", b"\r\n"),
    "no_final_line_break": _jl(_rows())[:-1],
    "blank_lines_between": _jl(_rows(10)) + b"\n  \n" + _jl(_rows(10)),
    "huge_line": _jl(_rows(10)) + json.dumps({"id": 1, "w": "a", "note": "x" * 1_000_000}).encode() + b"\n",
    "integer_then_fraction": _jl(_rows(20)) + _jl([{"id": 2.5, "w": "a", "note": "n"}]),
    "nulls_in_a_kept_key": _jl(_rows(10)) + _jl([{"id": None, "w": "a", "note": None}]) + _jl(_rows(10)),
    "keys_in_another_order": _jl(_rows(10)) + _jl([{"note": "n", "w": "b", "id": 7}]),
    "escaped_unicode": _jl(_rows(10)) + b'{"id": 1, "w": "a", "note": "\\u00e9\\u2028"}\n',
}


@pytest.mark.parametrize("case", sorted(BENIGN_JSONL))
def test_jsonl_oddities_release_the_local_engines_bytes(engine: Any, case: str, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(BENIGN_JSONL[case])
    local, eng = _labels_both(engine, src, tmp_path, keep=["id", "note"])
    assert local[0] == "ok", local
    _agree(local, eng, feather=False)


# ------------------------------------------------------------------------------------------------ Feather
def _table(n: int = 40, /, **extra: Callable[[int], Any]) -> Any:
    cols = {"id": pa.array(range(n), pa.int64()), "w": pa.array([W3[i % 3] for i in range(n)], pa.string()),
            "age": pa.array([i % 10 for i in range(n)], pa.int64()),
            "lat": pa.array([48.8 + (i % 10) / 100 for i in range(n)], pa.float64()),
            "lon": pa.array([2.3 + (i % 7) / 100 for i in range(n)], pa.float64())}
    cols.update({k: f(n) for k, f in extra.items()})
    return pa.table(cols, metadata={"origin": "test"})


def _feather(table: Any, chunk: int = 8) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=chunk):
            w.write_batch(b)
    return bytes(sink.getvalue().to_pybytes())


def _hostile_feather(case: str) -> bytes:
    good = _feather(_table())
    if case == "truncated_half":
        return good[: len(good) // 2]
    if case == "footer_cut":
        return good[:-10]
    if case == "arrow_stream":
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, _table().schema) as w:
            w.write_table(_table())
        return bytes(sink.getvalue().to_pybytes())
    if case == "empty":
        return b""
    if case == "damaged_body":
        return good[:600] + b"\xff" * 64 + good[664:]
    if case == "duplicate_names":
        return _feather(pa.table([pa.array(range(30)), pa.array([W3[i % 3] for i in range(30)]),
                                  pa.array(range(30))], names=["id", "w", "id"]))
    if case == "null_label":
        return _feather(pa.table({"id": range(30), "w": [W3[i % 3] if i != 29 else None for i in range(30)]}))
    if case == "fullwidth_twin_name":
        return _feather(_table(**{"\uff57": lambda n: pa.array([W3[i % 3] for i in range(n)])}))
    assert case.startswith("copy_from_row_")
    start = int(case.rsplit("_", 1)[1])
    return _feather(_table(note=lambda n: pa.array([W3[i % 3] if i >= start else "-" for i in range(n)])), chunk=8)


HOSTILE_FEATHER = ["arrow_stream", "damaged_body", "duplicate_names", "empty", "footer_cut", "fullwidth_twin_name",
                   "null_label", "truncated_half"]


@pytest.mark.parametrize("case", HOSTILE_FEATHER)
def test_hostile_feather_is_refused_as_the_local_engine_refuses_it(engine: Any, case: str, tmp_path: Path) -> None:
    src = tmp_path / "in.feather"
    src.write_bytes(_hostile_feather(case))
    local, eng = _labels_both(engine, src, tmp_path, keep=["id"])
    assert local[0] == "error"
    _agree(local, eng, feather=True)


BENIGN_FEATHER: dict[str, Callable[[], Any]] = {
    "zero_rows_typed": lambda: _table().slice(0, 0),
    "one_row": lambda: _table(1),
    "all_null_column": lambda: _table(extra=pa.nulls),
    "dictionary_labels": lambda: pa.table({"id": range(30), "w": pa.array([W3[i % 3] for i in range(30)])
                                           .dictionary_encode()}),
    "large_string_labels": lambda: pa.table({"id": range(30), "w": pa.array([W3[i % 3] for i in range(30)],
                                                                           pa.large_string())}),
    "list_column": lambda: _table(xs=lambda n: pa.array([[1, 2]] * n)),
}


@pytest.mark.parametrize("case", sorted(BENIGN_FEATHER))
def test_feather_oddities_release_the_local_engines_table(engine: Any, case: str, tmp_path: Path) -> None:
    table = BENIGN_FEATHER[case]()
    src = tmp_path / "in.feather"
    src.write_bytes(_feather(table))
    keep = [c for c in table.column_names if c != "w"]
    local, eng = _labels_both(engine, src, tmp_path, keep=keep)
    assert local[0] == "ok", local
    _agree(local, eng, feather=True)


def test_feather_zero_rows_of_type_null_agree_with_the_local_engine(engine: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.feather"
    src.write_bytes(_feather(pa.table({"id": pa.array([], pa.null()), "w": pa.array([], pa.null())})))
    local, eng = _labels_both(engine, src, tmp_path, keep=["id"])
    _agree(local, eng, feather=True)


@pytest.mark.parametrize("arrow_type", ["null", "int64", "list"])
def test_feather_zero_rows_in_an_empty_batch_agree_with_the_local_engine(engine: Any, arrow_type: str,
                                                                       tmp_path: Path) -> None:
    """No row: no value refused and no type checked (the local engine meets no row to check), an empty release
    with the input's schema; an empty record batch is no piece for a worker to release."""
    typ = {"null": pa.null(), "int64": pa.int64(), "list": pa.list_(pa.string())}[arrow_type]
    schema = pa.schema({"id": pa.int64(), "w": typ}, metadata={"origin": "test"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as w:
        w.write_batch(pa.RecordBatch.from_pylist([], schema=schema))
    src = tmp_path / "in.feather"
    src.write_bytes(sink.getvalue().to_pybytes())
    local, eng = _labels_both(engine, src, tmp_path, keep=["id"])
    assert local[0] == "ok", local
    _agree(local, eng, feather=True)
    assert _feather_table(eng[1]).schema.equals(schema, True)


@pytest.mark.parametrize(("start", "refused"), [(8, True), (32, False)])
def test_a_feather_copy_is_judged_on_the_files_rows_not_its_batches(engine: Any, start: int, refused: bool,
                                                                     tmp_path: Path) -> None:
    # batches of 8 of 40 rows: a copy in the last four batches is most of the file's one block (refused), a
    # copy in the last batch only is 8 of its 40 rows (released), on every engine whatever their batches
    src = tmp_path / "in.feather"
    src.write_bytes(_hostile_feather(f"copy_from_row_{start}"))
    local, eng = _labels_both(engine, src, tmp_path, keep=["id", "age", "lat", "lon"])
    assert local[0] == ("error" if refused else "ok")
    assert not refused or ("'note'" in local[1] and "32 of 40" in local[1])
    _agree(local, eng, feather=True)


def test_a_file_copy_at_the_local_engines_chunk_boundary_is_judged_as_the_local_engine_judges_it(
        engine: Any, tmp_path: Path) -> None:
    n = 1_100_000
    w = np.array(list(W3), dtype=object)[np.arange(n) % 3]
    note = np.full(n, "-", dtype=object)
    note[983_040:1_000_000] = w[983_040:1_000_000]
    src = tmp_path / "in.feather"
    src.write_bytes(_feather(pa.table({"id": np.arange(n), "w": w.tolist(), "note": note.tolist()}), chunk=n))
    name, where = engine
    local, out = tmp_path / "local.feather", tmp_path / "engine.feather"
    a = _outcome(lambda: privatize_file(SURE, src, "w", local, keep=["id"]), local)
    b = _outcome(lambda: _labels_engine(name)(SURE, src, "w", out, keep=["id"], **where), out)
    # the blocks count from the file's first row, whatever the readers' chunks: the copy (rows 983,041 to
    # 1,000,000) is 26 % of the block of rows 983,041 to 1,048,576, which both engines release; compared
    # from the local engine's chunk of 1,000,000 rows it was the whole of a block, and refused there only
    assert a[0] == "ok"
    _agree(a, b, feather=True)


# ------------------------------------------------------------------------------------------------ numbers, points
@pytest.mark.parametrize("fmt", ["feather", "jsonl"])
def test_numbers_copy_within_the_scale_is_refused_as_the_local_engine_refuses_it(engine: Any, fmt: str,
                                                                                 tmp_path: Path) -> None:
    name, where = engine
    table = _table(age2=lambda n: pa.array([float(i % 10) + 0.4 for i in range(n)]))
    src = tmp_path / f"in.{fmt}"
    src.write_bytes(_feather(table) if fmt == "feather" else _jl(table.to_pylist()))
    local, out = tmp_path / f"local.{fmt}", tmp_path / f"engine.{fmt}"
    a = _outcome(lambda: privatize_numbers_file(AGES, src, "age", local, keep=["id"], drop=["w", "lat", "lon"]), local)
    b = _outcome(lambda: privatize_numbers_engine(name, AGES, src, "age", out, keep=["id"], drop=["w", "lat", "lon"],
                                                  piece_bytes=60, **where), out)
    assert a[0] == "error" and "'age2'" in a[1]
    _agree(a, b, feather=fmt == "feather")


PAIRS: dict[str, Callable[[int], str]] = {
    "lat_lon_text": lambda i: f"{48.8 + (i % 10) / 100},{2.3 + (i % 7) / 100}",
    "wkt": lambda i: f"POINT({2.3 + (i % 7) / 100} {48.8 + (i % 10) / 100})",
    "bracketed": lambda i: f"[{48.8 + (i % 10) / 100}, {2.3 + (i % 7) / 100}]",
}


@pytest.mark.parametrize("fmt", ["feather", "jsonl"])
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_a_point_under_an_innocent_name_is_refused_as_the_local_engine_refuses_it(engine: Any, fmt: str, pair: str,
                                                                                  tmp_path: Path) -> None:
    name, where = engine
    table = _table(memo=lambda n: pa.array([PAIRS[pair](i) for i in range(n)]))
    src = tmp_path / f"in.{fmt}"
    src.write_bytes(_feather(table) if fmt == "feather" else _jl(table.to_pylist()))
    local, out = tmp_path / f"local.{fmt}", tmp_path / f"engine.{fmt}"
    a = _outcome(lambda: privatize_points_file(src, "lat", "lon", local, SETTINGS, keep=["id"], drop=["w", "age"]),
                 local)
    b = _outcome(lambda: privatize_points_engine(name, src, "lat", "lon", out, SETTINGS, keep=["id"],
                                                 drop=["w", "age"], piece_bytes=60, **where), out)
    assert a[0] == "error" and "'memo'" in a[1]
    assert b == a


# ------------------------------------------------------------------------------------------------ accounted runs
def _accounted_input(fmt: str, tail: dict[str, Any]) -> bytes:
    rows = [{"user": f"u{i % 5}", "id": i, "w": W3[i % 3]} for i in range(40)] + [tail]
    if fmt == "jsonl":
        return _jl(rows)
    return _feather(pa.Table.from_pylist(rows))


@pytest.mark.parametrize("fmt", ["feather", "jsonl"])
@pytest.mark.parametrize("tail", ["label_not_in_space", "null_user"])
def test_an_accounted_refusal_spends_nothing(engine: Any, fmt: str, tail: str, tmp_path: Path) -> None:
    name, where = engine
    src = tmp_path / f"in.{fmt}"
    last = {"user": "u1", "id": 40, "w": "zz"} if tail == "label_not_in_space" else {"user": None, "id": 40, "w": "a"}
    src.write_bytes(_accounted_input(fmt, last))
    persons = [f"u{i}" for i in range(5)]
    with Ledger(tmp_path / "l.db", budget=1000.0) as ledger:
        spent = ledger.spent(persons).tolist()
        runs = ledger.runs_table()
        mine = tmp_path / f"local.{fmt}"
        local = _outcome(lambda: privatize_file(SURE, src, "w", mine, keep=["id"],
                                                accounting=Accounting("user", ledger=ledger)), mine)
        out = tmp_path / f"engine.{fmt}"
        eng = _outcome(lambda: _labels_engine(name)(SURE, src, "w", out, keep=["id"], piece_bytes=60,
                                                    accounting=Accounting("user", ledger=ledger), **where), out)
        assert local[0] == "error" and eng == local
        assert ledger.spent(persons).tolist() == spent
        assert [r["state"] for r in ledger.runs_table()] == [r["state"] for r in runs]


@pytest.mark.parametrize("fmt", ["feather", "jsonl"])
def test_cli_accounted_refusal_on_an_engine_writes_and_spends_nothing(fmt: str, tmp_path: Path,
                                                                      scheduler: str) -> None:
    SURE.save(tmp_path / "m.npz")
    src = tmp_path / f"in.{fmt}"
    src.write_bytes(_accounted_input(fmt, {"user": "u1", "id": 40, "w": "zz"}))
    res = run("privatize", tmp_path / "m.npz", src, "-c", "w", "-o", tmp_path / f"o.{fmt}", "--keep", "id",
              "--engine", "dask", "--scheduler", scheduler, "--user-column", "user", "--budget", "1000",
              "--ledger", tmp_path / "l.db")
    assert_one_line_error(res, "'zz'")
    assert not (tmp_path / f"o.{fmt}").exists()
    if (tmp_path / "l.db").exists():
        with Ledger(tmp_path / "l.db") as ledger:
            assert ledger.spent([f"u{i}" for i in range(5)]).tolist() == [0.0] * 5


@pytest.mark.parametrize("change", ["truncated", "user_swapped_in_place", "label_swapped_in_place"])
def test_an_input_changed_during_an_accounted_release_writes_and_spends_nothing(change: str, tmp_path: Path,
                                                                               scheduler: str) -> None:
    """The file is rewritten on the driver once the first partition is done (the plan's persons or labels
    no longer what the pieces read): one error, no output, the run aborted, nothing spent."""
    from metricdp.integrations.dask import privatize_file_dask

    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    data = _jl([{"user": f"u{i % 5}", "id": i, "w": W3[i % 3]} for i in range(400)])
    src.write_bytes(data)
    swapped = {"truncated": data[: len(data) // 2], "user_swapped_in_place": data.replace(b'"u1"', b'"u2"'),
               "label_swapped_in_place": data.replace(b'"w": "a"', b'"w": "b"')}[change]
    told: list[str] = []

    def progress(done: int, total: int | None, what: str) -> None:
        if "releasing" in what and not told:
            told.append(what)
            src.write_bytes(swapped)

    persons = [f"u{i}" for i in range(5)]
    with Ledger(tmp_path / "l.db", budget=1e6) as ledger:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValidationError, match="changed while it was being released"):
                privatize_file_dask(SURE, src, "w", out, keep=["id", "user"], scheduler=scheduler, piece_bytes=60,
                                    accounting=Accounting("user", ledger=ledger), progress=progress)
        assert told and not out.exists()
        assert ledger.spent(persons).tolist() == [0.0] * 5
        assert [r["state"] for r in ledger.runs_table()] == ["aborted"]


# ------------------------------------------------------------------------------------------------ DataFrames
def _pdf(n: int = 300, /, **extra: Any) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({"id": np.arange(n), "w": [W3[i % 3] for i in range(n)], **extra})


def _w(n: int = 300) -> list[str]:
    return [W3[i % 3] for i in range(n)]


def _release_frame(engine_name: str, pdf: Any, request: pytest.FixtureRequest | None = None,
                   npartitions: int = 3, **kw: Any) -> Any:
    """``privatize_dask`` / ``privatize_spark`` of ``pdf`` cut into partitions, computed (warnings ignored)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if engine_name == "dask":
            dd = pytest.importorskip("dask.dataframe")
            from metricdp.integrations.dask import privatize_dask

            return privatize_dask(dd.from_pandas(pdf, npartitions=npartitions), "w", SURE, **kw).compute()
        assert request is not None
        spark = request.getfixturevalue("spark")
        from metricdp.integrations.spark import privatize_spark

        schema = spark.createDataFrame(pdf.head(1)).schema
        records = [tuple(x.item() if isinstance(x, np.generic) else x for x in r)
                   for r in pdf.itertuples(index=False, name=None)]  # partition k: the k-th run of rows, in order
        frame = spark.createDataFrame(spark.sparkContext.parallelize(records, npartitions), schema=schema)
        return privatize_spark(frame, "w", SURE, **kw).toPandas()


def _pandas_refuses(pdf: Any, **kw: Any) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError) as got:
            privatize_frame(pdf, column="w", mechanism=SURE, **kw)
    return str(got.value)


REVEALING: dict[str, Callable[[], dict[str, Any]]] = {
    "copy_in_one_partition_only": lambda: {"copy": [x if i >= 200 else "-" for i, x in enumerate(_w())]},
    "copy_in_the_first_rows": lambda: {"copy": [x if i < 60 else "-" for i, x in enumerate(_w())]},
    "copy_in_the_last_rows": lambda: {"copy": [x if i >= 240 else "-" for i, x in enumerate(_w())]},
    "upper_case_copy": lambda: {"copy": [x.upper() for x in _w()]},
    "zero_width_copy": lambda: {"copy": [x + "\u200b" for x in _w()]},
    "bytes_copy": lambda: {"copy": [x.encode() for x in _w()]},
    "numeric_code": lambda: {"code": [i % 3 for i in range(300)]},
    "numeric_code_jittered": lambda: {"code": [float(i % 3) + 0.001 * (i % 2) for i in range(300)]},
    "fullwidth_twin_name": lambda: {"\uff57": [0] * 300},
    "case_twin_name": lambda: {"W\u200b": [0] * 300},
}


#: copies in one partition of three only: under most of the frame's 300 rows, which the pandas API compares as one
#: block, so returned by it and by the engines alike (their sample's blocks are the frame's, not a partition's)
PARTITION_ONLY = {"copy_in_one_partition_only", "copy_in_the_first_rows", "copy_in_the_last_rows"}


def _pandas_verdict(pdf: Any) -> str | None:
    """The pandas API's refusal of ``pdf``'s release of ``w`` (None: released)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            privatize_frame(pdf, column="w", mechanism=SURE)
        except ValidationError as ex:
            return str(ex)
    return None


@pytest.mark.parametrize("engine_name", [
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
@pytest.mark.parametrize("case", sorted(REVEALING))
def test_a_revealing_column_is_judged_as_the_pandas_api_judges_it(engine_name: str, case: str,
                                                                  request: pytest.FixtureRequest) -> None:
    """Refused before the frame is returned where the pandas API refuses it, naming the same column;
    released where it releases it (a copy in one partition of three is under most of the frame's rows)."""
    if engine_name == "spark" and case == "bytes_copy":
        pytest.skip("a Spark frame from pandas holds bytes as binary: covered by the Dask case")
    pdf = _pdf(**REVEALING[case]())
    refused = _pandas_verdict(pdf)
    if case in PARTITION_ONLY:
        assert refused is None
        assert len(_release_frame(engine_name, pdf, request)) == len(pdf)
        return
    assert refused is not None
    culprit = refused.split(": column ", 1)[1].split(" ", 1)[0]
    with pytest.raises(ValidationError, match="DataFrame: column") as got:
        _release_frame(engine_name, pdf, request)
    assert f": column {culprit} " in str(got.value)


@pytest.mark.parametrize("engine_name", [
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
@pytest.mark.parametrize(("kw", "message"), [
    ({"keep": ["nope"]}, "no column 'nope' to be kept"),
    ({"drop": ["nope"]}, "no column 'nope' to be dropped"),
    ({"drop": ["w"]}, "column 'w' is released; it cannot also be dropped"),
    ({"keep": ["w"]}, "column 'w' is released; it cannot also be kept"),
])
def test_keep_and_drop_are_checked_as_the_pandas_api_checks_them(engine_name: str, kw: dict[str, Any], message: str,
                                                                 request: pytest.FixtureRequest) -> None:
    assert message in _pandas_refuses(_pdf(), **kw)
    with pytest.raises(ValidationError, match=message):
        _release_frame(engine_name, _pdf(), request, **kw)


@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
@pytest.mark.parametrize("index_name", ["w", "city", None])
def test_dask_an_index_holding_the_released_column_is_refused(index_name: str | None) -> None:
    pd = pytest.importorskip("pandas")
    pdf = _pdf()
    pdf.index = pd.Index(_w(), name=index_name)
    _pandas_refuses(pdf)
    with pytest.raises(ValidationError):
        _release_frame("dask", pdf)


@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_dask_a_column_name_that_is_not_text_is_one_error() -> None:
    pdf = _pdf()
    pdf[0] = _w()
    assert "must be text" in _pandas_refuses(pdf)
    with pytest.raises(ValidationError, match="must be text"):
        _release_frame("dask", pdf)


def _across_a_boundary() -> Any:
    """105,536 rows whose column ``copy`` holds ``w`` in 45,535 of the first 65,536 (the pandas API's first block:
    356 of its 512 compared rows), laid across row 40,000 so that neither side holds it in most of its rows."""
    n = 105_536
    w = np.array([W3[i % 3] for i in range(n)], dtype=object)
    copy = np.full(n, "-", dtype=object)
    copy[:19_999] = w[:19_999]  # under half of rows 1 to 40,000
    copy[40_000:65_536] = w[40_000:65_536]  # 39 % of rows 40,001 to 105,536
    return _pdf(n, copy=copy)


@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_dask_a_copy_across_a_partition_boundary_is_refused_as_the_pandas_api_refuses_it() -> None:
    dd = pytest.importorskip("dask.dataframe")
    from metricdp.integrations.dask import privatize_dask

    pdf = _across_a_boundary()
    assert "'copy'" in _pandas_refuses(pdf) and "356 of 512" in _pandas_refuses(pdf)
    frame = dd.from_pandas(pdf, npartitions=1).repartition(divisions=[0, 40_000, len(pdf) - 1])
    assert frame.npartitions == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError, match=r"'copy' .* in 356 of 512 compared rows, first at row 1 "
                                                  r"\(partition 0\)"):
            privatize_dask(frame, "w", SURE)


@pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))
def test_spark_a_copy_across_a_partition_boundary_is_refused_as_the_pandas_api_refuses_it(
        request: pytest.FixtureRequest) -> None:
    """Spark's partitions, and the Arrow batches of each, cut the frame elsewhere than the pandas API's blocks."""
    pdf = _across_a_boundary()
    assert "356 of 512" in _pandas_refuses(pdf)
    with pytest.raises(ValidationError, match=r"'copy' .* in 356 of 512 compared rows, first at row 1 "
                                              r"\(partition 0\)"):
        _release_frame("spark", pdf, request, npartitions=3)


@pytest.mark.parametrize("engine_name", [
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
def test_a_copy_in_a_minority_of_the_frames_rows_is_released_as_the_pandas_api_releases_it(
        engine_name: str, request: pytest.FixtureRequest) -> None:
    """Whole partitions holding a copy, under most of the pandas API's block: released by all (a sample cut
    at the partitions' first rows refused it)."""
    pdf = _pdf(copy=[x if i < 140 else "-" for i, x in enumerate(_w())])
    assert _pandas_verdict(pdf) is None
    got = _release_frame(engine_name, pdf, request, npartitions=5)  # two partitions all copy, one in part
    assert got["copy"].tolist() == pdf["copy"].tolist()


@pytest.mark.parametrize("fmt", ["feather", "jsonl"])
def test_a_file_copy_in_the_last_pieces_only_is_judged_as_the_local_engine_judges_it(engine: Any, fmt: str,
                                                                                     tmp_path: Path) -> None:
    """The file path samples on the driver, over the file as the local engine reads it (a Feather file: one
    record batch here): a copy in the last of many pieces, under most of the file's rows, is released by both
    (a per-piece sample would refuse it); in most of them, refused by both."""
    for tail, verdict in ((100, "ok"), (200, "error")):
        table = _table(300, note=lambda n, t=tail: pa.array([W3[i % 3] if i >= n - t else "-" for i in range(n)]))
        (where := tmp_path / str(tail)).mkdir()
        src = where / f"in.{fmt}"
        src.write_bytes(_feather(table, chunk=300) if fmt == "feather" else _jl(table.to_pylist()))
        local, eng = _labels_both(engine, src, where, keep=["id", "age", "lat", "lon"])
        assert local[0] == verdict, local
        _agree(local, eng, feather=fmt == "feather")


@pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))
@pytest.mark.parametrize("name", ["a.b", "a`b"])
def test_spark_a_column_named_with_a_dot_is_released_as_the_pandas_api_releases_it(
        name: str, request: pytest.FixtureRequest) -> None:
    pdf = _pdf(**{name: np.arange(300) * 7})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        privatize_frame(pdf, column="w", mechanism=SURE)
    got = _release_frame("spark", pdf, request)
    assert sorted(got[name].tolist()) == sorted((np.arange(300) * 7).tolist())
