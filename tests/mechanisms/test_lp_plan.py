"""Plans of every LP family: sizes by hand and against the builders' own counts, refusal before any LP."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ResourceLimitError
from metricdp.mechanisms import lp_plan
from metricdp.mechanisms.constopt import constopt
from metricdp.mechanisms.lp_plan import (
    BYTES_PER_ROW,
    CONSTOPT_FAST_DENSE,
    check_plan,
    plan_constopt,
    plan_optimal,
    plan_spanner,
)
from metricdp.mechanisms.spanner import spanner
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, run

SPACE = MetricSpace.from_points(np.random.default_rng(3).normal(size=(9, 2)))


def test_optimal_sizes_by_hand() -> None:
    p = plan_optimal(10)
    assert (p.family, p.rows, p.nonzeros) == ("optimal", 900 + 10, 2 * 900 + 100)


def test_spanner_sizes_by_hand() -> None:
    # n = 4 on a path of 3 edges: 2 * 3 * 4 = 24 edge rows, plus 4 row sums and 4 loss rows;
    # each edge row has 2 non-zeros, each row sum and loss row 4 (+ the loss variable in each loss row)
    p = plan_spanner(4, 3)
    assert (p.variables, p.privacy_rows, p.rows, p.nonzeros) == (17, 24, 32, 48 + 32 + 4)
    assert p.bytes == BYTES_PER_ROW * 32 + 16.0 * (84 - 64) + 8.0 * 16 * 16
    assert p.seconds == pytest.approx(180.0 * (4 / 200) ** 4.2)
    assert "up to 24 privacy rows" in p.summary() and "spanner (fast) on 4 x 4" in p.summary()


def test_constopt_sizes_by_hand() -> None:
    # n = 3; column 0 frees rows 1 and 2, column 1 frees row 0: f = 3 free entries;
    # rows (22): 2 * 1 + 0 + 0 = 2 ordered pairs within a column; (25), (26): 3 each
    free = np.zeros((3, 3), bool)
    free[1, 0] = free[2, 0] = free[0, 1] = True
    p = plan_constopt(free, fit="paper", lambdas=3)
    assert (p.variables, p.privacy_rows, p.rows) == (3 + 3 + 1, 2 + 6, 6 + 2 + 6)
    assert p.nonzeros == 2 * 3 * 4 + 2 * 2 + 4 * 3
    assert p.bytes == BYTES_PER_ROW * p.rows + 8.0 * CONSTOPT_FAST_DENSE * 9
    assert p.seconds == pytest.approx(3.4 * (3 / 400) ** 1.8)
    assert plan_constopt(free, fit="normalised").seconds == pytest.approx(2.3 * p.seconds)
    full = plan_constopt(free, formulation="full", fit="paper")
    assert full.bytes == BYTES_PER_ROW * 14 + 16.0 * (40 - 28) + 8.0 * 16 * 9
    assert full.seconds == pytest.approx(516.0 * (3 / 400) ** 3.5)


def test_constopt_plan_counts_the_builders_lp() -> None:
    seen: list[str] = []
    mech = constopt(SPACE, 1.0, neighbours=2, fit="paper", progress=lambda d, t, m: seen.append(m))
    counts = mech.info["lp"]["paper_counts"]  # the paper's LP as the builder counts it (Theorem 1)
    plan = seen[0]
    assert plan.startswith(f"constopt (fast) on 9 x 9: {counts['variables']:,} variables, ")
    assert f"up to {counts['rows_22'] + counts['rows_25'] + counts['rows_26']:,} privacy rows" in plan


def test_spanner_plan_counts_the_builders_edge_rows() -> None:
    seen: list[str] = []
    mech = spanner(SPACE, 1.0, progress=lambda d, t, m: seen.append(m))
    rows = 2 * mech.params["spanner_edges"] * 9
    assert seen[0].startswith("spanner (fast) on 9 x 9: 82 variables, ") and f"up to {rows:,} privacy rows" in seen[0]


@pytest.mark.parametrize(("build", "what"), [
    (lambda p: spanner(SPACE, 1.0, progress=p), "spanner on 9 points needs up to"),
    (lambda p: constopt(SPACE, 1.0, neighbours=2, progress=p), "constopt on 9 points needs up to"),
])
def test_refused_before_any_lp(monkeypatch, build, what) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1KiB")
    seen: list[str] = []
    with pytest.raises(ResourceLimitError, match=what) as info:
        build(lambda d, t, m: seen.append(m))
    assert seen == [] and "; " in str(info.value)  # no LP ran; one error with a suggestion


def test_check_plan_names_family_size_and_suggestion(monkeypatch) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1MiB")
    with pytest.raises(ResourceLimitError, match=r"^spanner on 400 points needs up to .*, 1,034,400 privacy rows\) "
                                                 r"and the limit is .*; try this$"):
        check_plan(plan_spanner(400, 1293), "try this")


def test_cli_build_refuses_a_constopt_that_cannot_fit(tmp_path, monkeypatch) -> None:
    pts = tmp_path / "p.csv"
    pts.write_text("label,x,y\n" + "".join(f"p{i},{i % 3},{i // 3}\n" for i in range(9)))
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "10KiB")  # the space fits (2 kB), its LP (64 kB) does not
    r = run("build", pts, "-m", "constopt", "-e", "1", "--out", tmp_path / "c.npz")
    assert_one_line_error(r, "constopt on 9 points needs up to", "fewer free neighbours")
    assert not (tmp_path / "c.npz").exists()


def test_durations_in_words() -> None:
    assert [lp_plan._duration(s) for s in (0.2, 42.0, 61.0, 150.0, 7200.0, 86400.0 * 3)] == [
        "1 s", "42 s", "1 minute", "2 minutes", "2 hours", "3 days"]
