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


@pytest.mark.parametrize("name", names())
def test_every_family_builds_and_is_private(name: str) -> None:
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
    points = tmp_path / "grid.csv"
    points.write_text("label,x,y\n" + "".join(f"c{i},{i % 3}.0,{i // 3}.0\n" for i in range(9)))
    args = ["build", points, "--mechanism", name, "--epsilon", EPSILON, "--out", tmp_path / "m.npz"]
    if name == "weighted-exponential":
        weights = tmp_path / "w.csv"
        weights.write_text("label,weight\n" + "".join(f"c{i},{w}\n" for i, w in enumerate(WEIGHTS)))
        args += ["--weights", weights]
    if name == "constopt":
        args += ["--neighbours", 3]
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
    with pytest.raises(ValidationError, match=param):
        build(name, GRID, EPSILON, **params)


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
    assert {n for n in names() if get(n).outputs} == {"exponential", "optimal"}
    for name in names():
        if get(name).outputs:
            mech = build(name, GRID, EPSILON, outputs=ys)
            assert mech.matrix.shape == (GRID.n, 2) and audit(mech.matrix, GRID.distances).satisfies(EPSILON)
        else:
            with pytest.raises(ValidationError, match=f"{name} has no separate output set.*exponential, optimal"):
                build(name, GRID, EPSILON, outputs=ys, **PARAMS.get(name, {}))
    assert registry.supports_outputs("custom") and not registry.supports_outputs("krr")
