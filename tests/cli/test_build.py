"""``metricdp build`` end to end, the mechanism adapters, and the error contract of the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from metricdp import (
    MetricSpace,
    PrivacyViolationError,
    SolverError,
    ValidationError,
    load_mechanism,
    read_points,
)
from metricdp.cli import build as build_cli
from metricdp.cli.example import example_text
from metricdp.mechanisms import registry
from tests.cli_helpers import assert_one_line_error, run, usage_text

POINTS = "label,x,y\na,0,0\nb,1,0\nc,0,2\nd,3,3\n"


@pytest.fixture
def points(tmp_path: Path) -> Path:
    p = tmp_path / "points.csv"
    p.write_text(POINTS)
    return p






# ----------------------------------------------------------------------------- success
def test_build_exponential_writes_the_library_mechanism(points, tmp_path):
    from metricdp.mechanisms.exponential import exponential

    out = tmp_path / "em.npz"
    result = run("build", points, "--mechanism", "exponential", "--epsilon", 0.5, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no progress noise when stderr is not a terminal
    summary = dict(line.split(None, 1) if " " in line else (line, "") for line in result.stdout.splitlines())
    assert summary["mechanism"].strip() == "exponential"
    assert summary["n"].strip() == "4"
    assert summary["file"].strip() == str(out)
    assert "epsilon (audited)" in result.stdout
    assert "worst-case loss" in result.stdout
    mech = load_mechanism(out)
    ref = exponential(read_points(points), 0.5)
    np.testing.assert_array_equal(mech.matrix, ref.matrix)
    assert mech.epsilon == 0.5
    assert mech.audit().epsilon <= 0.5 * (1 + 1e-9)
    assert f"{ref.worst_case_loss():.6g}" in result.stdout


def test_build_calibrate_metric_and_npy(points, tmp_path):
    out = tmp_path / "em.npz"
    result = run(
        "build", points, "-m", "exponential", "-e", 0.5, "--calibrate", "--metric", "manhattan", "-o", out
    )
    assert result.exit_code == 0, result.output
    mech = load_mechanism(out)
    assert mech.params["calibrated"] is True
    assert mech.space.metric == "manhattan"
    assert mech.space.distances[0, 3] == pytest.approx(6.0)  # |3-0| + |3-0|
    np.save(tmp_path / "d.npy", np.asarray(mech.space.distances))
    result = run("build", tmp_path / "d.npy", "-m", "exponential", "-e", 0.5, "-o", tmp_path / "d.npz")
    assert result.exit_code == 0, result.output
    assert load_mechanism(tmp_path / "d.npz").space.metric == "precomputed"


@pytest.mark.parametrize("fmt", ["csv", "npy"])
def test_build_weighted_exponential_with_weights_file(points, tmp_path, fmt):
    from metricdp.mechanisms.exponential import weighted_exponential

    y = np.array([1.0, 2.0, 0.5, 4.0])
    if fmt == "csv":
        wfile = tmp_path / "w.csv"
        wfile.write_text("label,weight\nd,4\nb,2\na,1\nc,0.5\n")  # any order, with a header
    else:
        wfile = tmp_path / "w.npy"
        np.save(wfile, y)
    out = tmp_path / "w.npz"
    result = run("build", points, "-m", "weighted-exponential", "-e", 1.0, "--weights", wfile, "-o", out)
    assert result.exit_code == 0, result.output
    ref = weighted_exponential(read_points(points), 1.0, y)
    np.testing.assert_allclose(load_mechanism(out).matrix, ref.matrix, rtol=1e-15)


def test_build_krr_with_ldp_epsilon(points, tmp_path):
    out = tmp_path / "k.npz"
    result = run("build", points, "-m", "krr", "--ldp-epsilon", 2.0, "-o", out)
    assert result.exit_code == 0, result.output
    mech = load_mechanism(out)
    assert mech.params["ldp_epsilon"] == pytest.approx(2.0)
    assert mech.epsilon == pytest.approx(2.0 / 1.0)  # d_min = d(a, b) = 1


@pytest.mark.slow
def test_real_subprocess_of_the_installed_entry_point(tmp_path):
    script = Path(sys.executable).with_name("metricdp")
    cmd = (
        [str(script)] if script.exists() else [sys.executable, "-c", "from metricdp.cli import main; main()"]
    )
    (tmp_path / "caps.csv").write_text(example_text("europe-capitals"))
    proc = subprocess.run(
        [*cmd, "build", "caps.csv", "--mechanism", "exponential", "--epsilon", "0.01", "--out", "em.npz"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "exponential" in proc.stdout
    assert load_mechanism(tmp_path / "em.npz").n == 43


# ----------------------------------------------------------------------------- adapters
def test_every_mechanism_name_is_wired():
    assert set(registry.names()) == {m.value for m in build_cli.MechanismName}
    assert set(registry.names()) == {
        "exponential", "weighted-exponential", "krr", "geometric", "optimal", "spanner", "constopt",
        "madlib", "planar-laplace", "subsampled-exponential", "discrete-laplace", "user-centric",
    }  # fmt: skip


P4 = [0.1, 0.2, 0.3, 0.4]  # the PRIOR file below, in label order


@pytest.mark.parametrize(
    ("argv", "module", "function", "args", "kwargs"),
    [
        ("-m exponential -e 1 --calibrate", "exponential", "exponential", (1.0,), {"calibrate": True}),
        ("-m krr -e 1", "krr", "krr", (), {"epsilon": 1.0}),
        ("-m krr --ldp-epsilon 3", "krr", "krr", (), {"epsilon": None, "ldp_epsilon": 3.0}),
        ("-m geometric -e 1", "geometric", "geometric", (1.0,), {}),
        (
            "-m optimal -e 1 --objective expected --prior PRIOR --time-limit 5",
            "optimal", "optimal", (1.0,), {"objective": "expected", "prior": P4, "time_limit": 5.0},
        ),
        ("-m spanner -e 1 --stretch 2", "spanner", "spanner", (1.0,), {"stretch": 2.0}),
        (
            "-m constopt -e 1 -r 2 --fit paper --lambdas 0.1,1 --quantile 0.9",
            "constopt", "constopt", (1.0,),
            {"neighbours": 2, "fit": "paper", "lambdas": (0.1, 1.0), "quantile": 0.9},
        ),
        ("-m madlib -e 1 --samples 50 --seed 3", "madlib", "madlib", (1.0,), {"samples": 50, "rng": 3}),
        ("-m planar-laplace -e 1", "planar_laplace", "planar_laplace", (1.0,), {}),
        (
            "-m subsampled-exponential -e 1 --candidates 3 --base-weights PRIOR",
            "subsampled", "subsampled_exponential", (1.0,), {"candidates": 3, "base": P4},
        ),
    ],
)  # fmt: skip
def test_adapters_pass_only_the_given_options(
    monkeypatch, points, tmp_path, argv, module, function, args, kwargs
):
    prior = tmp_path / "prior.csv"
    prior.write_text("a,0.1\nb,0.2\nc,0.3\nd,0.4\n")
    calls = []

    def fake_builder(family):
        assert family.builder == f"metricdp.mechanisms.{module}:{function}"

        def fake(space, *a, **kw):
            calls.append((a, kw))
            raise ValidationError("stop here")

        return fake

    monkeypatch.setattr(registry.Family, "builder_function", fake_builder)
    argv = [str(prior) if x == "PRIOR" else x for x in argv.split()]
    result = run("build", points, *argv, "-o", tmp_path / "m.npz")
    assert_one_line_error(result, "stop here")
    ((got_args, got_kwargs),) = calls
    assert got_args == args
    assert set(got_kwargs) == set(kwargs)
    for key, value in kwargs.items():
        if isinstance(value, list):
            np.testing.assert_allclose(got_kwargs[key], value)
        else:
            assert got_kwargs[key] == value


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["-m", "exponential"], ["--mechanism exponential needs --epsilon"]),
        (["-m", "exponential", "-e", "0"], ["--epsilon must be finite and > 0"]),
        (["-m", "exponential", "-e", "nan"], ["--epsilon must be finite and > 0"]),
        (
            ["-m", "exponential", "-e", "1", "--stretch", "2"],
            ["--stretch does not apply to --mechanism exponential"],
        ),
        (["-m", "geometric", "-e", "1", "--calibrate"], ["--calibrate does not apply"]),
        (["-m", "weighted-exponential", "-e", "1"], ["needs --weights FILE"]),
        (["-m", "krr", "-e", "1", "--ldp-epsilon", "1"], ["exactly one of --epsilon and --ldp-epsilon"]),
        (["-m", "krr"], ["exactly one of --epsilon and --ldp-epsilon"]),
        (["-m", "krr", "--ldp-epsilon", "-2"], ["--ldp-epsilon must be finite and > 0"]),
        (["-m", "constopt", "-e", "1", "--lambdas", "0.1,x"], ["--lambdas must be comma-separated numbers"]),
    ],
)
def test_option_errors(points, tmp_path, argv, fragments):
    out = tmp_path / "m.npz"
    assert_one_line_error(run("build", points, *argv, "-o", out), *fragments)
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("a,1\nb,2\nc,3\n", ["--weights", "no value for 1 label(s): 'd'"]),
        ("a,1\nb,2\nc,3\nd,4\nzz,5\n", ["1 label(s) not in the space: 'zz'"]),
        ("a,1\nb,2\nc,x\nd,4\n", ["line 3: 'x' is not a number"]),
        ("a,1\na,2\nc,3\nd,4\n", ["label 'a' appears twice"]),
        ("a,1,2\n", ["line 1 has 3 fields"]),
        ("a,1\nb,2\nc,-3\nd,4\n", ["weights"]),  # the library refuses non-positive weights
    ],
)
def test_weights_file_errors(points, tmp_path, content, fragments):
    w = tmp_path / "w.csv"
    w.write_text(content)
    out = tmp_path / "m.npz"
    result = run("build", points, "-m", "weighted-exponential", "-e", 1, "--weights", w, "-o", out)
    assert_one_line_error(result, *fragments)
    assert not out.exists()


def test_file_errors(points, tmp_path):
    out = tmp_path / "m.npz"
    assert_one_line_error(
        run("build", tmp_path / "none.csv", "-m", "exponential", "-e", 1, "-o", out), "no such file"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("label,x\na,1\nb,oops\n")
    assert_one_line_error(
        run("build", bad, "-m", "exponential", "-e", 1, "-o", out), "non-numeric coordinate"
    )
    assert_one_line_error(
        run("build", points, "-m", "exponential", "-e", 1, "-o", tmp_path / "no" / "m.npz"), "does not exist"
    )
    result = run("build", points, "-m", "exponential", "-e", 1, "-o", tmp_path)  # a usage error
    assert result.exit_code == 2
    assert "is a directory" in usage_text(result)
    assert_one_line_error(
        run("build", points, "-m", "exponential", "-e", 1, "--metric", "haversine", "-o", out),
        "label,lat,lon",
    )
    assert not out.exists()


def test_usage_errors_exit_2(points, tmp_path):
    result = run("build", points, "-m", "laplace", "-e", 1, "-o", tmp_path / "m.npz")
    assert result.exit_code == 2
    assert "laplace" in result.stderr
    assert run("build", points, "-e", 1, "-o", tmp_path / "m.npz").exit_code == 2  # --mechanism missing


@pytest.mark.parametrize(
    "error",
    [PrivacyViolationError("only 2-mDP\nrefusing"), SolverError("time limit reached", status="1")],
)
def test_audit_violation_and_solver_failure_exit_1(monkeypatch, points, tmp_path, error):
    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr(registry.Family, "builder_function", lambda family: failing)
    out = tmp_path / "m.npz"
    result = run("build", points, "-m", "optimal", "-e", 1, "-o", out)
    assert_one_line_error(result, str(error).split("\n")[0], code=1)
    assert not out.exists()


def test_debug_shows_the_exception(points, tmp_path):
    result = run("--debug", "build", points, "-m", "exponential", "-e", -1, "-o", tmp_path / "m.npz")
    assert result.exit_code != 0
    assert isinstance(result.exception, ValidationError)
    result = run("build", points, "-m", "exponential", "-e", -1, "-o", tmp_path / "m.npz")
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_help_and_version():
    for command in ([], ["build"], ["evaluate"], ["privatize"], ["example"]):
        result = run(*command, "--help")
        assert result.exit_code == 0, result.output
        assert "Usage" in result.stdout
    result = run("--version")
    assert result.exit_code == 0
    import metricdp

    assert result.stdout.strip() == f"metricdp {metricdp.__version__}"


def test_build_mechanism_api_rejects_unknown_names():
    space = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValidationError, match="unknown mechanism 'nope'"):
        build_cli.build_mechanism(space, "nope", 1.0)
    with pytest.raises(ValidationError, match="unknown option"):
        build_cli.build_mechanism(space, "exponential", 1.0, {"colour": "red"})


# ----------------------------------------------------------------------------- shared helpers (cli._common)
def test_handle_errors_as_context_manager(capsys):
    import typer

    from metricdp.cli._common import handle_errors

    with pytest.raises(typer.Exit) as info, handle_errors():
        raise FileNotFoundError(2, "No such file or directory", "x.csv")
    assert info.value.exit_code == 2
    assert capsys.readouterr().err == "error: No such file or directory: x.csv\n"
    with pytest.raises(typer.Exit) as info, handle_errors():
        raise SolverError("infeasible\n  (status 2)")
    assert info.value.exit_code == 1
    assert capsys.readouterr().err == "error: infeasible (status 2)\n"
    with pytest.raises(KeyError), handle_errors():  # a bug keeps its traceback
        raise KeyError("x")


def test_json_and_number_helpers(capsys):
    from metricdp.cli._common import echo_json, fmt

    echo_json({"a": np.float64(np.inf), "b": np.arange(2), "c": (np.int64(3), None)})
    assert capsys.readouterr().out == '{"a": "inf", "b": [0, 1], "c": [3, null]}\n'
    assert [fmt(None), fmt(True), fmt(np.int64(7)), fmt(np.inf), fmt(1 / 3), fmt("x")] == [
        "n/a", "true", "7", "inf", "0.333333", "x",
    ]  # fmt: skip


# ----------------------------------------------------------------------------- remapping and elastic metrics
def test_build_remap_lowers_expected_loss_and_stays_audited(points, tmp_path):
    prior = tmp_path / "prior.csv"
    prior.write_text("a,0.7\nb,0.1\nc,0.1\nd,0.1\n")
    plain, remapped = tmp_path / "plain.npz", tmp_path / "remap.npz"
    assert run("build", points, "-m", "exponential", "-e", 0.5, "-o", plain).exit_code == 0
    result = run("build", points, "-m", "exponential", "-e", 0.5, "--remap", "--prior", prior, "-o", remapped)
    assert result.exit_code == 0, result.output
    pi = np.array([0.7, 0.1, 0.1, 0.1])
    before, after = load_mechanism(plain), load_mechanism(remapped)
    assert after.expected_loss(pi) <= before.expected_loss(pi) + 1e-12
    assert after.audit().epsilon <= 0.5 * (1 + 1e-9)
    assert_one_line_error(run("build", points, "-m", "exponential", "-e", 0.5, "--remap", "-o", remapped),
                          "--remap needs --prior FILE")


@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_build_optimal_remap_takes_the_prior(points, tmp_path, objective):
    """--prior is the remapping's; with --objective expected it is the LP's too (review finding B)."""
    prior = tmp_path / "prior.csv"
    prior.write_text("a,0.7\nb,0.1\nc,0.1\nd,0.1\n")
    out = tmp_path / "m.npz"
    result = run("build", points, "-m", "optimal", "-e", 0.5, "--objective", objective, "--remap", "--prior", prior,
                 "-o", out)
    assert result.exit_code == 0, result.output
    mech = load_mechanism(out)
    assert mech.audit().epsilon <= 0.5 * (1 + 1e-9)
    assert mech.params["objective"] == objective


def test_build_on_an_elastic_metric(points, tmp_path):
    weights = tmp_path / "w.csv"
    weights.write_text("a,5\nb,1\nc,1\nd,1\n")
    out = tmp_path / "e.npz"
    result = run("build", points, "-m", "exponential", "-e", 0.5, "--elastic", weights, "-o", out)
    assert result.exit_code == 0, result.output
    mech = load_mechanism(out)
    assert mech.space.metric.startswith("elastic")
    assert mech.audit().epsilon <= 0.5 * (1 + 1e-9)


def test_build_refuses_an_output_that_is_its_input(points):
    result = run("build", points, "-m", "exponential", "-e", 0.5, "-o", points)
    assert_one_line_error(result, "input")
    assert points.read_text() == POINTS


# ----------------------------------------------------------------------------- a separate output set
OUTPUT_POINTS = "label,x,y\np,0.5,0.5\nq,2,2\n"


@pytest.mark.parametrize("name", ["exponential", "optimal"])
def test_build_with_output_points(points, tmp_path, name):
    from metricdp.mechanisms import build
    from metricdp.outputs import OutputSet

    ys = tmp_path / "ys.csv"
    ys.write_text(OUTPUT_POINTS)
    out = tmp_path / "r.npz"
    result = run("build", points, "-m", name, "-e", 0.5, "--outputs", ys, "--out", out)
    assert result.exit_code == 0, result.output
    assert "outputs" in result.stdout
    mech = load_mechanism(out)
    space = read_points(points)
    ref = build(name, space, 0.5, outputs=OutputSet.from_points(space, [[0.5, 0.5], [2.0, 2.0]], ["p", "q"]))
    np.testing.assert_allclose(mech.matrix, ref.matrix, rtol=0, atol=1e-12)
    assert mech.output_labels == ("p", "q") and mech.matrix.shape == (4, 2)


def test_build_with_output_distances(points, tmp_path):
    cross = tmp_path / "cross.csv"  # rows in another order than the space's
    cross.write_text("label,hub,far\nd,3,1\nb,1,5\na,0,6\nc,2,4\n")
    out = tmp_path / "r.npz"
    result = run("build", points, "-m", "optimal", "-e", 0.5, "--output-distances", cross, "--out", out)
    assert result.exit_code == 0, result.output
    mech = load_mechanism(out)
    np.testing.assert_array_equal(mech.loss_distances, [[0, 6], [1, 5], [2, 4], [3, 1]])
    assert mech.output_labels == ("hub", "far")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["-m", "krr", "--outputs", "{ys}"],
         ["do not apply to --mechanism krr", "exponential, discrete-laplace, optimal"]),
        (["-m", "optimal", "--outputs", "{ys}", "--output-distances", "{cross}"], ["one of --outputs"]),
        (["-m", "optimal", "--output-distances", "{bad}"], ["lacks input(s) ['d']"]),
        (["-m", "exponential", "--output-distances", "{cross}"], ["triangle inequality"]),
        (["-m", "optimal", "--outputs", "{ys3d}"], ["columns", "x,y,z"]),
        # another metric / other axes than the space's POINTS (label,x,y): refused, not measured as x, y
        (["-m", "exponential", "--outputs", "{ysgeo}"], ["columns", "lat,lon", "x,y"]),
        (["-m", "optimal", "--outputs", "{ysswap}"], ["columns", "y,x", "x,y"]),
    ],
)
def test_bad_outputs_are_one_line_errors(points, tmp_path, args, fragments):
    files = {"ys": "label,x,y\np,0,0\n", "ys3d": "label,x,y,z\np,0,0,0\nq,1,1,1\n",
             "ysgeo": "label,lat,lon\np,48.8,2.3\n", "ysswap": "label,y,x\np,0,1\n",
             "cross": "label,hub\na,0\nb,9\nc,2\nd,3\n", "bad": "label,hub\na,0\nb,1\nc,2\n"}
    for key, text in files.items():
        (tmp_path / f"{key}.csv").write_text(text)
    out = tmp_path / "r.npz"
    argv = [a.format(**{k: tmp_path / f"{k}.csv" for k in files}) for a in args]
    assert_one_line_error(run("build", points, "-e", 0.5, "--out", out, *argv), *fragments)
    assert not out.exists()


def test_weights_file_goes_through_the_csv_record_definition(points, tmp_path):
    # a label,value file with classic-Mac record ends was read by the csv module as three records;
    # the file layer refuses it in one line (file, line, byte offset), as every other CSV reader does
    weights = tmp_path / "w.csv"
    weights.write_bytes(b"a,1\rb,2\rc,3\rd,4\r")
    out = tmp_path / "m.npz"
    assert_one_line_error(run("build", points, "-m", "weighted-exponential", "-e", "1", "--weights", weights,
                              "-o", out), "line 1")
    assert not out.exists()
    weights.write_text("label,weight\na,1\nb,2\nc,3\nd,4\n")  # an optional header
    assert run("build", points, "-m", "weighted-exponential", "-e", "1", "--weights", weights, "-o", out).exit_code == 0


# ----------------------------------------------------------------------------- scale: plan, audit, refusal
def test_build_json_states_the_audit_and_the_plan(points, tmp_path):
    import json

    out = tmp_path / "m.npz"
    result = run("build", points, "--mechanism", "exponential", "--epsilon", "1", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    assert obj["audit"].startswith("dense") and obj["plan"]["audit"] == "dense" and obj["plan"]["n"] == 4
    assert obj["plan"]["bytes"] == 7 * 8 * 16
    assert load_mechanism(out).info["audit"] == "dense"
    table = run("build", points, "--mechanism", "exponential", "--epsilon", "1", "--out", tmp_path / "t.npz")
    assert "audit" in table.stdout and "dense (every pair against every output)" in table.stdout


def test_build_refuses_a_dense_build_over_the_limit_before_work(points, tmp_path, monkeypatch):
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "500B")  # reading 4 points fits; 7 4x4 arrays (896 B) do not
    out = tmp_path / "m.npz"
    result = run("build", points, "--mechanism", "exponential", "--epsilon", "1", "--out", out)
    assert_one_line_error(result, "exponential on 4 points needs about 896 B", "smaller region")
    assert not out.exists()


def test_build_refuses_a_large_cell_file_before_reading_its_distances(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1GiB")  # 20,000 cells' distances alone need 3.2 GB
    cells = tmp_path / "cells.csv"
    rows = "".join(f"c{i},{40 + (i // 150) * 0.009:.6f},{-74 + (i % 150) * 0.012:.6f}\n" for i in range(20_000))
    cells.write_text("label,lat,lon\n" + rows)
    out = tmp_path / "m.npz"
    result = run("build", cells, "--mechanism", "planar-laplace", "--epsilon", "1/km", "--out", out)
    assert_one_line_error(result, "planar-laplace on 20,000 points needs about 29 GB", "smaller region")
    assert not out.exists()
