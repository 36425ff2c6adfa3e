"""``metricdp evaluate``: table, ``--json`` parity with the library, estimated mechanisms, errors."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace, load_mechanism
from metricdp.audit import audit_epsilon, epsilon_tight
from metricdp.evaluation import evaluate_mechanism
from metricdp.loss import expected_loss, quantile_loss, uniform_losses, worst_case_loss
from metricdp.mechanisms.base import Mechanism, certify
from tests.cli_helpers import assert_one_line_error, run

HAS_BOUNDS = importlib.util.find_spec("metricdp.bounds") is not None






def _space(n: int = 7, seed: int = 1) -> MetricSpace:
    x = np.random.default_rng(seed).normal(size=(n, 2))
    return MetricSpace.from_points(x, [f"p{i}" for i in range(n)])


def _em(space: MetricSpace, eps: float) -> np.ndarray:
    m = np.exp(-eps * np.asarray(space.distances) / 2)
    return m / m.sum(axis=1, keepdims=True)


@pytest.fixture
def mech_file(tmp_path: Path) -> Path:
    space = _space()
    lp = {"variables": 49, "constraints": 300, "nonzeros": 900, "solve_seconds": 0.01}
    mech = certify(_em(space, 1.5), space, 1.5, "exponential", {"inner_epsilon": 1.5}, {"lp": lp})
    path = tmp_path / "m.npz"
    mech.save(path)
    return path


def test_json_equals_the_library_computation(mech_file):
    result = run("evaluate", mech_file, "--json", "--delta", 0.01, "--quantile", 0.8)
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    mech = load_mechanism(mech_file)
    m, d = np.asarray(mech.matrix), np.asarray(mech.space.distances)
    assert got["mechanism"] == "exponential"
    assert got["n"] == 7
    assert got["exact"] is True
    assert got["epsilon"] == 1.5
    assert got["delta"] == 0.01
    assert got["quantile"] == 0.8
    assert got["epsilon_audit"] == audit_epsilon(m, d, normalize=True)  # the rows the exact sampler realizes
    assert got["epsilon_tight"] == epsilon_tight(m, d, 0.01)
    assert got["epsilon_tight"] <= got["epsilon_audit"] <= 1.5 * (1 + 1e-9)
    assert got["loss_max"] == worst_case_loss(m, d)
    assert got["loss_quantile"] == quantile_loss(m, d, 0.8)
    assert got["loss_expected"] == expected_loss(m, d)
    u = np.sort(uniform_losses(d))
    assert got["loss_uniform"] == u[math.ceil(0.8 * 7) - 1]
    assert got["loss_uniform_max"] == u[-1]
    assert got["params"] == {"inner_epsilon": 1.5}
    assert got["lp"]["variables"] == 49
    if HAS_BOUNDS:
        from metricdp.bounds import lower_bound, lower_bound_quantile

        assert got["lower_bound"] == lower_bound(mech.space, 1.5).value
        assert got["lower_bound_quantile"] == lower_bound_quantile(mech.space, 1.5, 0.8).value
        assert got["lower_bound"] <= got["loss_max"]
    else:
        assert "lower_bound" not in got
    settings = got.pop("settings")  # the CLI's addition: what the numbers were computed from
    assert got == json.loads(json.dumps(evaluate_mechanism(mech, 0.01, 0.8)))
    assert settings["mechanism"] == "exponential" and settings["epsilon"] == 1.5
    assert settings["prior"] == "uniform" and settings["input"] == "m.npz"
    assert settings["input_sha256"] == hashlib.sha256(mech_file.read_bytes()).hexdigest()


def test_the_table_ends_with_the_settings_block(mech_file, tmp_path):
    prior = tmp_path / "prior.csv"
    prior.write_text("".join(f"p{i},1\n" for i in range(7)))
    result = run("evaluate", mech_file, "--prior", prior)
    assert result.exit_code == 0, result.output
    block = result.stdout[result.stdout.index("settings\n"):]
    assert "mechanism:    exponential" in block and "epsilon:      1.5 per unit of distance" in block
    assert "prior:        prior.csv" in block and "input:        m.npz" in block
    assert hashlib.sha256(mech_file.read_bytes()).hexdigest() in block


def test_table_for_people(mech_file):
    result = run("evaluate", mech_file)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("exponential", "epsilon (exact audit)", "epsilon tight (delta=0.001)", "worst-case loss",
                 "0.95-quantile loss", "uniform baseline", "lp variables"):  # fmt: skip
        assert text in out
    mech = load_mechanism(mech_file)
    assert f"{mech.worst_case_loss():.6g}" in out


def test_a_false_claim_is_refused_like_every_command_refuses_it(tmp_path):
    # one load path, one verdict: evaluate refuses the file as privatize does
    space = _space(3)
    m = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # identity: no privacy at all
    path = tmp_path / "id.npz"
    meta = {"mechanism": "identity", "epsilon": 1.0, "params": {}, "space": {"metric": "precomputed"}}
    np.savez(path, matrix=m, distances=space.distances, labels=np.array(space.labels),
             metadata=np.array(json.dumps(meta)))
    result = run("evaluate", path, "--json")
    assert_one_line_error(result, "claims epsilon=1.0", code=1)


def test_estimated_mechanism_is_not_audited(tmp_path):
    space = _space(4)
    estimate = np.array(
        [[0.7, 0.3, 0.0, 0.0], [0.2, 0.8, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.5, 0.5]]
    )
    half = [0.1, 0.2, 0.05, 0.3]
    info = {"estimate": {"samples_per_row": 100, "confidence": 0.95, "loss_half_width": half}}
    path = tmp_path / "est.npz"
    Mechanism(estimate, space, 2.0, "madlib", {"epsilon": 2.0, "samples": 100}, info, exact=False).save(path)
    result = run("evaluate", path, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["exact"] is False
    assert got["epsilon"] == 2.0
    assert got["epsilon_audit"] is None
    assert got["epsilon_tight"] is None
    assert "estimate" in got["audit"]
    assert got["loss_max_half_width"] == 0.3
    assert got["loss_quantile_half_width"] == 0.3
    assert got["loss_expected_half_width"] == pytest.approx(np.mean(half))
    assert got["estimate"] == {"samples_per_row": 100, "confidence": 0.95}
    assert got["loss_max"] == worst_case_loss(estimate, space.distances)
    table = run("evaluate", path)
    assert table.exit_code == 0
    assert "estimate" in table.stdout
    assert "±" in table.stdout
    assert "exact audit" not in table.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--delta", "1.5"], "--delta must be in [0, 1)"),
        (["--quantile", "0"], "--quantile must be in (0, 1]"),
    ],
)
def test_bad_options(mech_file, args, fragment):
    assert_one_line_error(run("evaluate", mech_file, *args), fragment)


def test_bad_files(tmp_path):
    assert_one_line_error(run("evaluate", tmp_path / "none.npz"), "no such file")
    (tmp_path / "caps.csv").write_text("label,x\na,1\nb,2\n")
    assert_one_line_error(run("evaluate", tmp_path / "caps.csv"), "not a mechanism file")
    np.savez(tmp_path / "other.npz", a=np.eye(2))
    assert_one_line_error(run("evaluate", tmp_path / "other.npz"), "missing matrix, distances, labels")


def test_quantile_changes_only_the_quantile_keys(mech_file):
    a = json.loads(run("evaluate", mech_file, "--json", "--quantile", 1).stdout)
    b = json.loads(run("evaluate", mech_file, "--json", "--quantile", 0.1).stdout)
    assert a["loss_quantile"] == a["loss_max"]
    assert b["loss_quantile"] <= a["loss_quantile"]
    assert a["loss_uniform"] == a["loss_uniform_max"]
    assert a["epsilon_audit"] == b["epsilon_audit"]


def test_evaluate_prior_reports_the_adversary(tmp_path):
    space = _space(4)
    path = tmp_path / "m.npz"
    certify(_em(space, 1.0), space, 1.0, "exponential").save(path)
    prior = tmp_path / "prior.csv"
    prior.write_text("p0,0.4\np1,0.3\np2,0.2\np3,0.1\n")
    result = run("evaluate", path, "--prior", prior, "--json")
    assert result.exit_code == 0, result.output
    adv = json.loads(result.stdout)["adversary"]
    assert 0 < adv["adversary_reidentification"] <= 1
    assert adv["prior_only_reidentification"] == pytest.approx(0.4)
    table = run("evaluate", path, "--prior", prior)
    assert "adversary: re-identification" in table.stdout


def test_a_rectangular_mechanism_says_its_bounds_are_not_available(tmp_path):
    from metricdp.evaluation import RECTANGULAR_BOUND_NOTE
    from metricdp.mechanisms.optimal import optimal
    from metricdp.outputs import OutputSet

    space = _space()
    mech = optimal(space, 1.0, outputs=OutputSet.from_points(space, [[0.0, 0.0], [1.0, 1.0]], ["o", "i"]))
    path = tmp_path / "r.npz"
    mech.save(path)
    result = run("evaluate", path, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["outputs"] == 2 and got["lower_bound_note"] == RECTANGULAR_BOUND_NOTE
    assert got["loss_max"] == pytest.approx(mech.worst_case_loss(), rel=1e-12)
    table = run("evaluate", path)
    assert table.exit_code == 0 and "not available" in table.stdout and "separate output set" in table.stdout
