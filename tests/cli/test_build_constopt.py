"""``metricdp build --mechanism constopt``: Algorithm 1 as the paper runs it, and the winner reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace, load_mechanism
from metricdp.cli import build as build_cli
from metricdp.mechanisms import registry
from metricdp.mechanisms.constopt import constopt
from tests.cli_helpers import run

#: seed 1, eps 0.5, r 2, lambda 250: the paper fit loses to EM (tests/mechanisms/constopt/test_fit.py)
EPS, ARGS = 0.5, ("--neighbours", 2, "--fit", "paper", "--lambdas", "250")


@pytest.fixture
def points(tmp_path: Path) -> Path:
    xy = np.random.default_rng(1).normal(size=(8, 2))
    p = tmp_path / "points.csv"
    p.write_text("label,x,y\n" + "".join(f"p{i},{float(x)!r},{float(y)!r}\n" for i, (x, y) in enumerate(xy)))
    return p


def _summary(stdout: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in stdout.splitlines() if " " in line)


def test_the_flag_is_declared_on_the_registry_param() -> None:
    param = registry.get("constopt").param("exponential_candidate")
    assert param.flag == "--no-exponential-candidate" and param.default is True


def test_the_flag_reaches_the_builder_as_false(monkeypatch) -> None:
    seen = {}

    def spy(space, epsilon, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(kwargs)
        return constopt(space, epsilon, **kwargs)

    monkeypatch.setattr(registry.Family, "builder_function", lambda self: spy)
    space = MetricSpace.from_points(np.random.default_rng(1).normal(size=(8, 2)))
    build_cli.build_mechanism(space, "constopt", EPS, {"no_exponential_candidate": True, "fit": "paper",
                                                       "neighbours": 2, "lambdas": "250"})
    assert seen["exponential_candidate"] is False
    seen.clear()
    build_cli.build_mechanism(space, "constopt", EPS, {"no_exponential_candidate": False, "neighbours": 2})
    assert "exponential_candidate" not in seen  # not given: the library's default (EM competes)


def test_by_default_em_wins_and_the_build_says_so(points: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    result = run("build", points, "-m", "constopt", "-e", EPS, *ARGS, "--out", out)
    assert result.exit_code == 0, result.output
    assert _summary(result.stdout)["candidate"].startswith("the exponential mechanism, loss ")
    mech = load_mechanism(out)
    assert mech.info["winner"] == "exponential"
    assert mech.params["exponential_candidate"] is True


def test_without_the_em_candidate_the_paper_lp_candidate_is_returned(points: Path, tmp_path: Path) -> None:
    default, paper = tmp_path / "default.npz", tmp_path / "paper.npz"
    assert run("build", points, "-m", "constopt", "-e", EPS, *ARGS, "--out", default).exit_code == 0
    result = run("build", points, "-m", "constopt", "-e", EPS, *ARGS, "--no-exponential-candidate", "--out", paper)
    assert result.exit_code == 0, result.output
    candidate = _summary(result.stdout)["candidate"]
    assert candidate.startswith("paper fit (lambda 250), loss ") and "left out" in candidate
    mech, em = load_mechanism(paper), load_mechanism(default)
    assert mech.info["winner"] == "paper"  # the file's provenance
    assert mech.params["exponential_candidate"] is False
    assert mech.audit().epsilon <= EPS * (1 + 1e-9)  # private at eps, audited
    assert mech.worst_case_loss() > em.worst_case_loss()  # the LP candidate, though EM is better here


def test_the_flag_does_not_apply_to_other_families(points: Path, tmp_path: Path) -> None:
    result = run("build", points, "-m", "spanner", "-e", EPS, "--no-exponential-candidate", "--out",
                 tmp_path / "s.npz")
    assert result.exit_code == 2 and "--no-exponential-candidate does not apply to --mechanism spanner" in result.stderr
