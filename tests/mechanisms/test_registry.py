"""The registry of mechanism families: listing, building by name, declared constraints.

Every registered family is built through the Python API and through the CLI and audited
(exact families) or checked against its proven epsilon (estimated ones); every declared
parameter of every family is fed invalid values and must give one ValidationError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.mechanisms import build, get, names, registry
from metricdp.mechanisms.base import AUDIT_RTOL
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, run

EPSILON = 0.8
GRID = MetricSpace.grid(3, 3, cell=1.0)
WEIGHTS = np.linspace(1.0, 2.0, GRID.n)

#: Fast, valid parameters for the families that need or benefit from some on 9 points.
PARAMS: dict[str, dict[str, object]] = {
    "weighted-exponential": {"weights": WEIGHTS},
    "constopt": {"neighbours": 3},
    "madlib": {"samples": 50, "rng": 0},
    "subsampled-exponential": {"samples": 50, "rng": 0, "candidates": 3},
    "user-centric": {"quality": 1.0},
}


def test_names_lists_every_family_once() -> None:
    listed = names()
    assert len(set(listed)) == len(listed)
    assert {"exponential", "krr", "geometric", "optimal", "spanner", "constopt", "madlib"} <= set(listed)
    for name in listed:
        family = get(name)
        assert family.name == name and family.description
        assert family.exact == (family.sampler is None)


def test_unknown_family_and_parameter_name_the_valid_ones() -> None:
    with pytest.raises(ValidationError, match="unknown mechanism 'laplace'; choose one of exponential"):
        build("laplace", GRID, 1.0)
    with pytest.raises(ValidationError, match=r"exponential takes no parameter 'weights'; it takes: calibrate"):
        build("exponential", GRID, 1.0, weights=WEIGHTS)
    with pytest.raises(ValidationError, match="weighted-exponential needs the parameter 'weights'"):
        build("weighted-exponential", GRID, 1.0)


#: Families built only on equally spaced lines, with their own outputs (past the ends).
LINE_FAMILIES = ("discrete-laplace",)


@pytest.mark.parametrize("name", names())
def test_every_family_builds_and_is_private(name: str) -> None:
    if name in LINE_FAMILIES:
        pytest.skip("a family of equally spaced lines: tests/mechanisms/test_numeric.py")
    mech = build(name, GRID, EPSILON, **PARAMS.get(name, {}))
    assert mech.name == name and mech.n == GRID.n
    assert mech.exact == get(name).exact
    if mech.exact:
        assert audit(mech.matrix, GRID.distances).satisfies(EPSILON, AUDIT_RTOL)
    else:
        assert mech.epsilon >= get(name).proven_epsilon(mech.params)
    releases = mech.sample(np.arange(GRID.n), rng=np.random.default_rng(0))
    assert releases.shape == (GRID.n,) and np.all((releases >= 0) & (releases < GRID.n))


@pytest.mark.parametrize("name", names())
def test_every_family_builds_through_the_cli(name: str, tmp_path) -> None:
    if name in LINE_FAMILIES:
        pytest.skip("a family of equally spaced lines: tests/cli/test_privatize_numbers.py builds it")
    points = tmp_path / "grid.csv"
    points.write_text("label,x,y\n" + "".join(f"c{i},{i % 3}.0,{i // 3}.0\n" for i in range(9)))
    args = ["build", points, "--mechanism", name, "--epsilon", EPSILON, "--out", tmp_path / "m.npz"]
    if name == "weighted-exponential":
        weights = tmp_path / "w.csv"
        weights.write_text("label,weight\n" + "".join(f"c{i},{w}\n" for i, w in enumerate(WEIGHTS)))
        args += ["--weights", weights]
    if name == "constopt":
        args += ["--neighbours", 3]
    if name == "user-centric":
        args += ["--quality", 1.0]
    if name in ("madlib", "subsampled-exponential"):
        args += ["--samples", 50, "--seed", 0]
    result = run(*args)
    assert result.exit_code == 0, result.output
    mech = load_mechanism(tmp_path / "m.npz")
    assert mech.name == name and mech.exact == get(name).exact
    if mech.exact:
        assert audit(mech.matrix, mech.distances).satisfies(EPSILON, AUDIT_RTOL)


def test_cli_refuses_an_option_the_family_does_not_take(tmp_path) -> None:
    points = tmp_path / "p.csv"
    points.write_text("label,x\na,0\nb,1\nc,3\n")
    result = run("build", points, "--mechanism", "exponential", "--epsilon", 1, "--stretch", 2, "--out",
                 tmp_path / "m.npz")
    assert_one_line_error(result, "--stretch does not apply to --mechanism exponential")
    assert not (tmp_path / "m.npz").exists()


def _invalid_values(param: registry.Param) -> list[object]:
    """Values every declared parameter of its kind must refuse."""
    if param.kind == "bool":
        return [1, 0.0, "yes", None, np.nan]
    if param.kind in ("int", "float"):
        values: list[object] = [True, False, "1", np.nan, math.inf, -math.inf, [1]]
        if not param.optional:  # None is the "not given" of a parameter whose default is None
            values.append(None)
        if param.kind == "int":
            values.append(1.5)
        if param.minimum is not None:
            values += [param.minimum - 1, -1e300]
            if param.open_minimum:
                values.append(param.minimum)
        if param.maximum is not None:
            values.append(param.maximum + 1)
        return values
    if param.kind == "choice":
        return ["no-such-choice", 1, True, ""] + ([] if param.optional else [None])
    if param.kind == "floats":
        return ["0.1,1", [0.1, -1.0], [np.nan], [True], 1.0]
    if param.kind == "vector":
        return [[-1.0] * GRID.n, [np.nan] * GRID.n, [[1.0] * GRID.n], "weights", True]
    if param.kind == "matrix":
        return [np.full((GRID.n, GRID.n), -1.0), np.ones(GRID.n), [["a"]]]
    return []  # rng: normalised (and refused) by the builder's check_rng


INVALID = [
    (name, param.name, value)
    for name in names()
    for param in get(name).params
    for value in _invalid_values(param)
]


@pytest.mark.parametrize(("name", "param", "value"), INVALID, ids=[f"{n}-{p}-{v!r}"[:60] for n, p, v in INVALID])
def test_every_declared_parameter_refuses_invalid_values(name: str, param: str, value: object) -> None:
    params = dict(PARAMS.get(name, {}))
    params[param] = value
    with pytest.raises(ValidationError, match=param) as info:
        build(name, GRID, EPSILON, **params)
    assert str(info.value).startswith(f"{name}: parameter {param!r} must "), info.value  # the one template


#: Per-point values (vectors, matrices) are the builder's to check against the space, naming the index.
DIRECT = [(n, p, v) for n, p, v in INVALID if get(n).param(p).kind not in ("vector", "matrix")]


@pytest.mark.parametrize(("name", "param", "value"), DIRECT, ids=[f"{n}-{p}-{v!r}"[:60] for n, p, v in DIRECT])
def test_builders_called_directly_refuse_the_same_values(name: str, param: str, value: object) -> None:
    """The builder itself (not only ``build``) validates from the declaration: one source."""
    params = dict(PARAMS.get(name, {}))
    params[param] = value
    builder = get(name).builder_function()
    args = (GRID, None) if get(name).epsilon == "or-ldp" else (GRID, EPSILON)
    with pytest.raises(ValidationError, match=param) as info:
        builder(*args, **params)
    assert str(info.value).startswith(f"{name}: parameter {param!r} must "), info.value


def test_invalid_value_message_names_family_parameter_and_value() -> None:
    with pytest.raises(ValidationError) as info:
        build("spanner", GRID, 1.0, stretch=0.5)
    assert str(info.value) == "spanner: parameter 'stretch' must be finite and >= 1, got 0.5"


def test_builders_refuse_a_non_bool_calibrate_directly() -> None:
    # the drift the registry ended: exponential(space, 1.0, calibrate="no") calibrated silently
    from metricdp.mechanisms.exponential import exponential

    with pytest.raises(ValidationError, match="calibrate"):
        exponential(GRID, 1.0, calibrate="no")  # type: ignore[arg-type]


def test_estimated_families_derive_their_epsilon_from_their_params() -> None:
    family = get("madlib")
    assert family.proven_epsilon({"epsilon": 0.5, "samples": 10}) == 0.5
    with pytest.raises(ValidationError, match="exact"):
        get("exponential").proven_epsilon({"epsilon": 0.5})
    with pytest.raises(ValidationError, match="epsilon"):
        family.proven_epsilon({"epsilon": math.inf})


# ----------------------------------------------------------------------------- matrix-free (text) families
def _point_space():
    from metricdp.pointspace import PointSpace

    g = np.random.default_rng(3)
    return PointSpace.from_points(g.normal(size=(40, 5)), [f"w{i}" for i in range(40)])


@pytest.mark.parametrize("name", registry.sampler_names())
def test_every_sampler_family_builds_with_its_proven_epsilon(name: str) -> None:
    family = registry.get_sampler(name)
    mech = family.build(_point_space(), 2.0)
    assert family.proven_epsilon(2.0) == 2.0
    out = mech.sample(np.arange(10), np.random.default_rng(0))
    assert out.shape == (10,) and np.all((out >= 0) & (out < 40))


SAMPLER_INVALID = [
    (name, p.name, v) for name in registry.sampler_names() for p in registry.get_sampler(name).params
    for v in _invalid_values(p) if v is not None
]


@pytest.mark.parametrize(("name", "param", "value"), SAMPLER_INVALID,
                         ids=[f"{n}-{p}-{v!r}"[:60] for n, p, v in SAMPLER_INVALID])
def test_every_sampler_parameter_refuses_invalid_values(name: str, param: str, value: object) -> None:
    with pytest.raises(ValidationError, match=param):
        registry.get_sampler(name).build(_point_space(), 1.0, **{param: value})


def test_unknown_sampler_family() -> None:
    with pytest.raises(ValidationError, match="unknown text mechanism 'nope'; choose one of exponential, tem"):
        registry.get_sampler("nope")


def test_only_families_with_outputs_take_them() -> None:
    from metricdp.outputs import OutputSet

    ys = OutputSet.from_points(GRID, [[0.5, 0.5], [1.5, 1.5]])
    assert {n for n in names() if get(n).outputs} == {"exponential", "optimal", *LINE_FAMILIES}
    for name in names():
        if name in LINE_FAMILIES:
            with pytest.raises(ValidationError, match="makes its own outputs"):
                build(name, GRID, EPSILON, outputs=ys)
        elif get(name).outputs:
            mech = build(name, GRID, EPSILON, outputs=ys)
            assert mech.matrix.shape == (GRID.n, 2) and audit(mech.matrix, GRID.distances).satisfies(EPSILON)
        else:
            takes = "exponential, discrete-laplace, optimal"
            with pytest.raises(ValidationError, match=f"{name} has no separate output set.*{takes}"):
                build(name, GRID, EPSILON, outputs=ys, **PARAMS.get(name, {}))
    assert registry.supports_outputs("custom") and not registry.supports_outputs("krr")


# ----------------------------------------------------------------------------- one source: signatures, CLI options
def _signature_default(entry: registry.Family | registry.SamplerFamily, name: str) -> object:
    import inspect

    fn = entry.builder_function() if isinstance(entry, registry.Family) else registry._resolve(entry.builder)
    parameter = inspect.signature(fn).parameters[name]
    return None if parameter.default is inspect.Parameter.empty else parameter.default


ENTRIES = [*registry.FAMILIES.values(), *registry.SAMPLER_FAMILIES.values()]


@pytest.mark.parametrize("entry", ENTRIES, ids=[("text-" if isinstance(e, registry.SamplerFamily) else "") + e.name
                                                for e in ENTRIES])
def test_every_declared_default_is_the_builders(entry) -> None:
    for param in entry.params:
        assert _signature_default(entry, param.name) == param.default, (entry.name, param.name)
        if param.default is not None:
            param.check(param.default, entry.name)  # a declared default is a valid value


def _click_params(*path: str) -> dict[str, object]:
    """Flag -> click parameter of ``metricdp PATH...``."""
    import typer.main

    from metricdp.cli import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {opt: p for p in command.params for opt in getattr(p, "opts", ())}


def _assert_option_matches(option: registry.Option, click_param) -> None:
    p = option.param
    from enum import Enum
    from pathlib import Path

    from metricdp.cli._options import shown

    annotation = click_param.type_descriptor.annotation
    if p.kind == "choice":
        assert issubclass(annotation, Enum) and tuple(m.value for m in annotation) == p.choices
    else:
        expected = {"bool": bool, "int": int, "float": float, "vector": Path, "floats": str, "rng": int}[p.kind]
        assert annotation is expected, (p.flag, annotation)
    if p.kind == "rng":
        assert click_param.min == 0  # a seed
    assert click_param.default in (None, False)  # not given: the library's default applies
    assert set(p.aliases) <= set(click_param.opts)
    if p.kind in ("int", "float", "floats"):
        assert p.describe() in click_param.help  # the range, in words
    if p.default is not None and p.kind not in ("bool", "rng"):
        assert f"default {shown(p.default)}" in click_param.help


@pytest.mark.parametrize(("command", "entries"), [(("build",), registry.FAMILIES),
                                                  (("text", "privatize"), registry.SAMPLER_FAMILIES),
                                                  (("text", "stats"), registry.SAMPLER_FAMILIES)])
def test_every_declared_flag_is_a_cli_option_of_the_same_type_and_default(command, entries) -> None:
    params = _click_params(*command)
    options = registry.options(entries.values())
    declared = {p.flag for e in entries.values() for p in e.params if p.flag}
    assert set(options) == declared
    for flag, option in options.items():
        assert flag in params, f"metricdp {' '.join(command)} lacks {flag}"
        _assert_option_matches(option, params[flag])


BOUNDED = [
    (name, p) for name in names() for p in get(name).params
    if p.flag and p.kind in ("int", "float") and (p.minimum is not None or p.maximum is not None)
]


#: Valid values of the required options a family's command line needs beside the one tested.
CLI_REQUIRED: dict[str, dict[str, object]] = {"user-centric": {"quality": 1.0}}


@pytest.mark.parametrize(("name", "param"), BOUNDED, ids=[f"{n}-{p.name}" for n, p in BOUNDED])
def test_cli_ranges_are_the_registry_ranges(name: str, param: registry.Param) -> None:
    """Just outside a declared bound, the CLI refuses with the registry's template naming the flag."""
    from metricdp.cli.build import build_mechanism

    outside = []
    if param.minimum is not None:
        outside.append(param.minimum if param.open_minimum else param.minimum - (1 if param.kind == "int" else 1e-9))
    if param.maximum is not None:
        outside.append(param.maximum if param.open_maximum else param.maximum + (1 if param.kind == "int" else 1e-9))
    keyword = param.flag[2:].replace("-", "_")
    eps = None if get(name).epsilon == "or-ldp" else EPSILON
    for value in outside:
        if param.kind == "int":
            value = int(value)
        with pytest.raises(ValidationError) as info:
            build_mechanism(GRID, name, eps, {**CLI_REQUIRED.get(name, {}), keyword: value})
        assert str(info.value).startswith(f"{param.flag} must be finite and "), info.value


def test_options_refuse_a_flag_declared_unalike() -> None:
    a = registry.Family("a", "x:y", "", (registry.Param("n", "int", 1, "", "--n", minimum=1),))
    b = registry.Family("b", "x:y", "", (registry.Param("n", "int", 1, "", "--n", minimum=2),))
    assert registry.options([a, a])["--n"].families == ("a", "a")
    with pytest.raises(RuntimeError, match="b declares --n unlike a"):
        registry.options([a, b])


def test_samples_beyond_memory_are_one_error_line(tmp_path) -> None:
    points = tmp_path / "p.csv"
    points.write_text("label,x\na,0\nb,1\nc,3\n")
    result = run("build", points, "-m", "madlib", "-e", 1, "--samples", 10**12, "-o", tmp_path / "m.npz")
    assert_one_line_error(result, "--samples must be finite and >= 2 and <= 1e+08")
    from metricdp.errors import ResourceLimitError

    with pytest.raises(ResourceLimitError, match="madlib with 100,000,000 samples per row"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("METRICDP_MEMORY_LIMIT", str(2**30))
            build("madlib", GRID, 1.0, samples=10**8)


# ----------------------------------------------------------------------------- a new family: one module, one entry
@pytest.fixture
def toy(monkeypatch):
    from tests.mechanisms.toy_family import ENTRY

    monkeypatch.setitem(registry.FAMILIES, ENTRY.name, ENTRY)
    return ENTRY


def test_a_toy_family_builds_through_python_and_a_fresh_cli(toy, tmp_path) -> None:
    from metricdp.cli import build as build_cli
    from tests.cli_helpers import make_app, runner
    from tests.mechanisms.toy_family import toy as toy_builder

    assert "toy" in names()
    mech = build("toy", GRID, 1.0, spread=4.0)
    assert mech.name == "toy" and mech.params["spread"] == 4.0 and mech.audit().epsilon <= 0.25 * (1 + 1e-9)
    with pytest.raises(ValidationError, match=r"^toy: parameter 'spread' must be finite and >= 1, got 0.5$"):
        toy_builder(GRID, 1.0, spread=0.5)

    app = make_app(build_cli.register)  # the command is built after the entry was registered
    points = tmp_path / "p.csv"
    points.write_text("label,x\na,0\nb,1\nc,3\n")
    out = tmp_path / "toy.npz"
    result = runner.invoke(app, ["build", str(points), "-m", "toy", "-e", "1", "--spread", "3", "-o", str(out)])
    assert result.exit_code == 0, result.output
    saved = load_mechanism(out)
    assert saved.name == "toy" and saved.params["spread"] == 3.0
    assert audit(saved.matrix, saved.distances).epsilon <= 1.0 / 3.0 * (1 + 1e-9)
    result = runner.invoke(app, ["build", str(points), "-m", "toy", "-e", "1", "--spread", "0.5", "-o", str(out)])
    assert_one_line_error(result, "--spread must be finite and >= 1, got 0.5")
    result = runner.invoke(app, ["build", "--help"])
    assert "--spread" in result.output and "toy: divisor of epsilon" in " ".join(result.output.split())
    from metricdp.cli.calibrate import calibratable

    assert "toy" in calibratable()  # exact, nothing required: calibrate offers it too


def test_the_toy_family_is_not_registered_outside_its_fixture() -> None:
    assert "toy" not in names()
