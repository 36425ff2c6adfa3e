"""The LP benchmark's row: its record, checkpoint and renderings, on hand-made rows."""

from __future__ import annotations

import json

from metricdp.experiments.bench_lp_rows import (
    COLUMNS,
    BenchRow,
    append_checkpoint,
    markdown_report,
    markdown_table,
    table_rows,
)


def _rows() -> list[BenchRow]:
    ok = BenchRow(400, "constopt r=10", "fast", epsilon=2.0, data="glove", variables=5201, seconds=13.84,
                  peak_mib=267.2, loss_max=3.4583250381, objective=3.4583250381, gap=-2.5e-10,
                  epsilon_audit=float("inf"), vs_full="full timed out")
    late = BenchRow(400, "constopt r=10", "full", epsilon=2.0, status="time-out", seconds=351.4,
                    message="killed after 381 s")
    return [ok, late]


def test_cells_follow_the_columns() -> None:
    cells = dict(zip((key for _, key in COLUMNS), table_rows(_rows())[0], strict=True))
    assert cells["n"] == "400" and cells["epsilon"] == "2" and cells["variables"] == "5201"
    assert cells["seconds"] == "13.8" and cells["peak_mib"] == "267"
    assert cells["loss_max"] == "3.45833" and cells["objective"] == "3.458325038"
    assert cells["gap"] == "-2.5e-10" and cells["epsilon_audit"] == "inf"
    assert cells["rounds"] == "-" and cells["vs_full"] == "full timed out"
    assert table_rows(_rows())[1][[k for _, k in COLUMNS].index("seconds")] == "351"


def test_markdown_table_and_report() -> None:
    lines = markdown_table(_rows()).splitlines()
    assert lines[0] == "| " + " | ".join(h for h, _ in COLUMNS) + " |"
    assert lines[1].count("---:") == len(COLUMNS) - 4  # four text columns, left-aligned
    assert lines[-1] == "- n = 400, eps = 2, constopt r=10, full: time-out: killed after 381 s"
    report = markdown_report(_rows(), {"epsilon": 2.0}, {"cpu": "test-cpu", "cores": "2", "memory": ""})
    assert report.startswith("# `metricdp bench lp`")
    assert "Machine: cpu test-cpu, cores 2\n" in report and "Settings: epsilon = 2.0" in report


def test_append_checkpoint_keeps_every_row(tmp_path) -> None:
    log = tmp_path / "rows.jsonl"
    for row in _rows():
        append_checkpoint(log, row)
    back = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [r["formulation"] for r in back] == ["fast", "full"]
    assert back[0]["epsilon_audit"] == "inf" and back[0]["seconds"] == 13.84  # standard JSON, read back by float()
    assert back[1]["message"] == "killed after 381 s" and back[0]["extra"] == {}
