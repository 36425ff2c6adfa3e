"""Mechanism files verified from first principles.

Each hostile file below was accepted at commit bff3a6d; each is refused now.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from metricdp.errors import ClaimError, MechanismFileError, PrivacyViolationError, ValidationError
from metricdp.mechanisms import build
from metricdp.mechanisms.base import Mechanism
from metricdp.mechanisms.exponential import exponential, exponential_matrix
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import MetricSpace

POINTS = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
SPACE = MetricSpace.from_points(POINTS, ["a", "b", "c", "d"])


def _arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _tamper(path, **changes) -> None:
    arrays = _arrays(path)
    meta = json.loads(str(arrays["metadata"]))
    for key, value in changes.pop("meta", {}).items():
        meta[key] = value
    for key, value in changes.pop("params", {}).items():
        meta["params"][key] = value
    arrays["metadata"] = np.array(json.dumps(meta))
    arrays.update(changes)
    arrays = {k: v for k, v in arrays.items() if v is not None}  # None: the member removed
    np.savez(path, **arrays)


def test_a_genuine_file_round_trips(tmp_path) -> None:
    mech = exponential(SPACE, 0.5)
    mech.save(tmp_path / "m.npz")
    back = load_mechanism(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    assert back.epsilon == 0.5 and back.exact


def test_distances_scaled_against_their_points_are_refused(tmp_path) -> None:
    # case 3: distances x 10 and a matrix rebuilt to fit passed the load-time audit
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    d10 = SPACE.distances * 10
    _tamper(path, distances=d10, matrix=exponential_matrix(d10, 0.5))
    with pytest.raises(ClaimError, match=r"stored distance d\('a', 'b'\) = 10.0 differs from the 1.0"):
        load_mechanism(path)


def test_a_trusted_space_audits_against_its_own_distances(tmp_path) -> None:
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    assert load_mechanism(path, space=SPACE).epsilon == 0.5
    shrunk = MetricSpace.from_points(POINTS / 10, SPACE.labels)
    with pytest.raises(ClaimError, match=r"claims epsilon=0\.5 but its matrix is only"):
        load_mechanism(path, space=shrunk)
    other = MetricSpace.from_points(POINTS, ["a", "b", "c", "x"])
    with pytest.raises(ClaimError, match="labels differ from the trusted space's"):
        load_mechanism(path, space=other)


@pytest.mark.parametrize("claim", ["Infinity", "1e400", 0, -1, "nan", None, True])
def test_claims_that_cannot_be_privacy_are_refused(tmp_path, claim) -> None:
    # case 4: "epsilon": Infinity (or 1e400, or 0) made privatize release an identity matrix
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    arrays = _arrays(path)
    literal = claim if claim in ("Infinity", "1e400") else json.dumps(claim)  # raw JSON text of the claim
    arrays["metadata"] = np.array(str(arrays["metadata"]).replace('"epsilon": 0.5', f'"epsilon": {literal}'))
    arrays["matrix"] = np.eye(4)
    np.savez(path, **arrays)
    with pytest.raises(MechanismFileError):
        load_mechanism(path)


def test_exact_is_not_a_claim_a_file_makes(tmp_path) -> None:
    # case 4: "exact": false on an exponential file skipped the audit
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    _tamper(path, meta={"exact": False}, matrix=np.eye(4))
    with pytest.raises(MechanismFileError, match="claims exact=False, but 'exponential' is an exact family"):
        load_mechanism(path)


def test_an_estimated_family_gets_its_epsilon_from_its_params(tmp_path) -> None:
    # case 2: a madlib file with params.epsilon = 1e6 released every input unchanged
    path = tmp_path / "m.npz"
    build("madlib", SPACE, 0.01, samples=20, rng=0).save(path)
    _tamper(path, params={"epsilon": 1e6})
    with pytest.raises(ClaimError, match=r"only proven 1000000\.0-mDP"):
        load_mechanism(path)


def test_an_estimated_family_with_scaled_points_is_refused(tmp_path) -> None:
    path = tmp_path / "m.npz"
    build("madlib", SPACE, 0.01, samples=20, rng=0).save(path)
    _tamper(path, points=POINTS * 1e6)
    with pytest.raises(ClaimError, match="differs from the"):
        load_mechanism(path)


def test_subsampled_base_weights_are_validated(tmp_path) -> None:
    path = tmp_path / "m.npz"
    build("subsampled-exponential", SPACE, 0.5, samples=20, rng=0, candidates=2).save(path)
    _tamper(path, params={"base": [1.0, -1.0, 0.5, 0.5]})
    with pytest.raises(MechanismFileError, match="base"):
        load_mechanism(path)
    _tamper(path, params={"base": None, "candidates": 0})
    with pytest.raises(MechanismFileError, match="candidates"):
        load_mechanism(path)


def test_non_standard_json_is_refused(tmp_path) -> None:
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    arrays = _arrays(path)
    arrays["metadata"] = np.array(str(arrays["metadata"]).replace('"calibrated": false', '"calibrated": NaN'))
    np.savez(path, **arrays)
    with pytest.raises(MechanismFileError, match="not JSON"):
        load_mechanism(path)


# ----------------------------------------------------------------------------- the Python API (case 6)
def test_a_mechanism_cannot_be_constructed_unaudited() -> None:
    with pytest.raises(PrivacyViolationError, match="refusing to return it"):
        Mechanism(np.eye(4), SPACE, 0.01, "exponential")
    with pytest.raises(ValidationError, match="epsilon"):
        Mechanism(exponential(SPACE, 0.5).matrix, SPACE, -5, "exponential")
    with pytest.raises(ValidationError, match="row"):
        Mechanism(np.full((4, 4), 0.3), SPACE, 0.5, "custom")
    with pytest.raises(ValidationError, match="not a claim a mechanism can make"):
        Mechanism(exponential(SPACE, 0.5).matrix, SPACE, 0.5, "exponential", exact=False)


def test_from_matrix_audits() -> None:
    m = exponential_matrix(SPACE.distances, 0.5)
    mech = Mechanism.from_matrix(m, SPACE, 0.5)
    assert mech.name == "custom" and mech.info["epsilon_audit"] <= 0.5
    with pytest.raises(PrivacyViolationError):
        Mechanism.from_matrix(m, SPACE, 0.1)


def test_an_estimated_file_must_carry_what_its_sampler_reads(tmp_path):
    # review: a subsampled file without `candidates` loaded, then sampling raised KeyError;
    # candidates = 10**12 raised MemoryError at sample time
    path = tmp_path / "m.npz"
    build("subsampled-exponential", SPACE, 0.5, samples=20, rng=0, candidates=2).save(path)
    arrays = _arrays(path)
    meta = json.loads(str(arrays["metadata"]))
    del meta["params"]["candidates"]
    arrays["metadata"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    with pytest.raises(MechanismFileError, match="lack 'candidates'"):
        load_mechanism(path)
    build("subsampled-exponential", SPACE, 0.5, samples=20, rng=0, candidates=2).save(path)
    _tamper(path, params={"candidates": 10**12})
    with pytest.raises(MechanismFileError, match="candidates"):
        load_mechanism(path)


def test_members_the_loader_does_not_need_are_never_read(tmp_path):
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    arrays = _arrays(path)
    np.savez_compressed(path, **arrays, junk=np.zeros(20_000_000, dtype=np.uint8))  # 20 MB, compresses to ~20 kB
    assert load_mechanism(path).epsilon == 0.5


def test_a_string_epsilon_is_not_a_claim(tmp_path):
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    _tamper(path, meta={"epsilon": "0.5"})
    with pytest.raises(MechanismFileError, match="epsilon must be a JSON number"):
        load_mechanism(path)


# ----------------------------------------------------------------------------- a separate output set
def _rect(tmp_path, name="exponential"):
    from metricdp.outputs import OutputSet

    ys = OutputSet.from_points(SPACE, [[0.5, 0.5], [2.0, 1.0], [0.0, 3.0]], ["p", "q", "r"])
    mech = build(name, SPACE, 0.5, outputs=ys)
    path = tmp_path / "r.npz"
    mech.save(path)
    return mech, path


@pytest.mark.parametrize("name", ["exponential", "optimal"])
def test_a_rectangular_file_round_trips(tmp_path, name) -> None:
    mech, path = _rect(tmp_path, name)
    arrays = _arrays(path)
    assert arrays["matrix"].shape == (4, 3) and arrays["output_labels"].tolist() == ["p", "q", "r"]
    assert json.loads(str(arrays["metadata"]))["outputs"] == {"m": 3, "metric": "euclidean"}
    back = load_mechanism(path)
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    np.testing.assert_array_equal(back.loss_distances, mech.loss_distances)
    np.testing.assert_array_equal(back.outputs.points, mech.outputs.points)
    assert back.output_labels == ("p", "q", "r") and back.worst_case_loss() == mech.worst_case_loss()
    assert "outputs" not in back.info  # metadata, not info: saving again writes it once
    back.save(tmp_path / "again.npz")
    assert load_mechanism(tmp_path / "again.npz").output_labels == ("p", "q", "r")


def test_tampered_cross_distances_are_refused(tmp_path) -> None:
    _, path = _rect(tmp_path)
    cross = _arrays(path)["output_distances"].copy()
    cross[2, 1] *= 0.5  # a better-looking loss than the points give
    _tamper(path, output_distances=cross)
    with pytest.raises(ClaimError, match=r"stored output distance d\('c', 'q'\)"):
        load_mechanism(path)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"matrix": np.full((4, 4), 0.25)}, r"matrix has shape \(4, 4\), expected \(4, 3\)"),
        ({"output_distances": np.ones((3, 3))}, r"output_distances has shape \(3, 3\), expected \(4, 3\)"),
        ({"output_distances": np.full((4, 3), -1.0)}, "finite and >= 0"),
        ({"output_labels": np.array(["p", "p", "r"])}, "'p' appears twice"),
        ({"output_labels": np.array(["p", "q"])}, "declared m = 3"),
        ({"output_labels": np.array([1.0, 2.0, 3.0])}, "1-d string array"),
        ({"output_points": np.ones((3, 5))}, r"output_points has shape \(3, 5\)"),
        ({"output_points": np.full((3, 2), np.inf)}, "not all finite"),
        ({"meta": {"outputs": {"m": "3"}}}, "integer 'm'"),
        ({"meta": {"outputs": None}}, "declares no outputs"),
        ({"meta": {"outputs": {"m": 3, "metric": "nonsense"}}}, "unknown metric"),
        ({"meta": {"mechanism": "krr"}}, "never have"),
        # the outputs' metric is a claim like any other: the space's (verified on the points) or precomputed
        ({"meta": {"outputs": {"m": 3, "metric": "haversine"}}}, "claims the haversine metric.*euclidean"),
        ({"output_points": None}, "claims the euclidean metric.*no output_points"),
    ],
)
def test_hostile_rectangular_files_are_refused(tmp_path, changes, match) -> None:
    _, path = _rect(tmp_path)
    _tamper(path, **changes)
    with pytest.raises(MechanismFileError, match=match):
        load_mechanism(path)


def test_a_rectangular_file_without_output_labels_is_refused(tmp_path) -> None:
    _, path = _rect(tmp_path)
    arrays = _arrays(path)
    del arrays["output_labels"]
    np.savez(path, **arrays)
    with pytest.raises(MechanismFileError, match="lacks output_labels"):
        load_mechanism(path)


def test_a_square_file_with_stray_output_arrays_is_refused(tmp_path) -> None:
    path = tmp_path / "m.npz"
    exponential(SPACE, 0.5).save(path)
    _tamper(path, output_distances=np.ones((4, 4)))
    with pytest.raises(MechanismFileError, match="declares no outputs"):
        load_mechanism(path)
