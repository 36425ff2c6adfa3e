"""Mechanism files that record their structure: loaded through the structured proof, re-derived from content."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import metricdp.mechanisms.exponential as ex
import metricdp.mechanisms.file as mfile
import metricdp.mechanisms.planar_laplace as pl
import metricdp.remap as rm
from metricdp.audit import audit
from metricdp.audit_structured import lattice_steps
from metricdp.errors import ClaimError, MechanismFileError
from metricdp.mechanisms.base import Mechanism
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import MetricSpace

GRID = MetricSpace.grid(4, 5, 100.0)
PRIOR = np.linspace(1.0, 2.0, GRID.n) / np.linspace(1.0, 2.0, GRID.n).sum()


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builders' structured proofs from 10 inputs up (the production threshold is 1,500)."""
    for module in (pl, rm, ex):
        monkeypatch.setattr(module, "DENSE_MAX_N", 10)


@pytest.fixture
def no_dense_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader's dense audit fails the test if it runs."""
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("the dense audit ran")

    monkeypatch.setattr(mfile, "audit", refuse)


def _arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _rewrite(path, structure=..., **changes) -> None:
    """Rewrite a file's members; ``structure`` replaces the metadata's record (None removes it)."""
    arrays = _arrays(path)
    meta = json.loads(str(arrays["metadata"]))
    if structure is None:
        meta.pop("structure")
    elif structure is not ...:
        meta["structure"] = structure
    for key, value in changes.pop("params", {}).items():
        meta["params"][key] = value
    for key, value in changes.pop("meta", {}).items():
        meta[key] = value
    arrays["metadata"] = np.array(json.dumps(meta))
    arrays.update(changes)
    np.savez(path, **arrays)


def _built(kind: str) -> Mechanism:
    if kind == "planar-laplace":
        return pl.planar_laplace(GRID, 0.01)
    if kind == "exponential":
        return ex.exponential(GRID, 0.01)
    return rm.bayesian_remap(_built(kind.removesuffix("+remap")), PRIOR)


LATTICE = {"version": 1, "proof": "lattice-chain", "order": 6, "box": [4, 5], "cell": 100.0, "cells": list(range(20))}
KERNEL = {"version": 1, "proof": "kernel", "inner_epsilon": 0.01}
RECORDS = {
    "planar-laplace": LATTICE,
    "planar-laplace+remap": {"version": 1, "proof": "post-processing", "base": LATTICE},
    "exponential": KERNEL,
    "exponential+remap": {"version": 1, "proof": "post-processing", "base": KERNEL},
}


@pytest.mark.parametrize("kind", list(RECORDS))
def test_a_structured_file_loads_through_its_proof(tmp_path, small_threshold, no_dense_audit, kind) -> None:
    mech = _built(kind)
    assert mech.info["structure"] == RECORDS[kind]
    mech.save(tmp_path / "m.npz")
    back = load_mechanism(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    assert back.info["structure"] == RECORDS[kind]
    assert back.info["audit"] == ("post-processing" if kind == "exponential+remap" else
                                  "kernel" if kind == "exponential" else "lattice-chain")
    exact = audit(mech.matrix, GRID.distances, normalize=True).epsilon
    assert exact <= back.info["epsilon_audit"] <= 0.01 * (1 + 1e-9)
    back.save(tmp_path / "again.npz")  # the record survives a round trip
    assert load_mechanism(tmp_path / "again.npz").info["structure"] == RECORDS[kind]


def _three_cells(tmp_path, epsilon: float, structure: dict[str, object]):
    """A hand-made 1 x 3 lattice mechanism (cell 1) whose adjacent rows differ by at most log(5/3)."""
    matrix = np.array([[0.5, 0.3, 0.2], [0.3, 0.4, 0.3], [0.2, 0.3, 0.5]])
    path = tmp_path / "m.npz"
    Mechanism.from_matrix(matrix, MetricSpace.grid(1, 3, 1.0), 0.52).save(path)
    _rewrite(path, structure=structure, meta={"epsilon": epsilon})
    return path


def test_the_lattice_chain_of_a_hand_made_file(tmp_path, no_dense_audit) -> None:
    # the one step (0, 1): Lambda = max |log ratio| of adjacent rows = log(0.5/0.3); every pair is
    # 1 or 2 cells apart on a line, so the bound is Lambda * stretch (the exact level is log(5/3))
    record = {"version": 1, "proof": "lattice-chain", "order": 6, "box": [1, 3], "cell": 1.0, "cells": [0, 1, 2]}
    back = load_mechanism(_three_cells(tmp_path, 0.52, record))
    expected = math.log(5 / 3) * lattice_steps(6)[1]
    assert expected <= back.info["epsilon_audit"] <= expected * (1 + 1e-12)
    assert audit(back.matrix, back.distances, normalize=True).epsilon == pytest.approx(math.log(5 / 3))


def test_a_record_is_no_way_around_the_audit(tmp_path) -> None:
    # epsilon 0.511 holds (the exact level is log(5/3) = 0.5108), but the claimed proof cannot show
    # it (it costs the stretch): the file is refused, not audited some other way
    record = {"version": 1, "proof": "lattice-chain", "order": 6, "box": [1, 3], "cell": 1.0, "cells": [0, 1, 2]}
    with pytest.raises(ClaimError, match=r"claims epsilon=0.511 but the lattice-chain bound of its matrix is 0.512"):
        load_mechanism(_three_cells(tmp_path, 0.511, record))
    _rewrite(tmp_path / "m.npz", structure=None)  # without a record: the dense audit, which it passes
    assert load_mechanism(tmp_path / "m.npz").info["audit"] == "dense"


@pytest.fixture
def lattice_file(tmp_path, small_threshold):
    path = tmp_path / "pl.npz"
    _built("planar-laplace").save(path)
    return path


def test_a_bumped_entry_is_refused(lattice_file) -> None:
    matrix = _arrays(lattice_file)["matrix"].copy()
    matrix[1, 4] *= 1.2  # the pair (1, 0) above epsilon in column 4
    matrix[1] /= matrix[1].sum()
    assert audit(matrix, GRID.distances, normalize=True).epsilon > 0.01
    _rewrite(lattice_file, matrix=matrix)
    with pytest.raises(ClaimError, match=r"claims epsilon=0.01 but the lattice-chain bound of its matrix is 0.01"):
        load_mechanism(lattice_file)


@pytest.mark.parametrize(("structure", "match"), [
    ({**LATTICE, "box": [5, 4]}, r"input '4' lies in lattice cell \[0, 4\] of its points, not \[1, 0\]"),
    ({**LATTICE, "box": [5, 5]}, r"do not span the 5 x 5 box"),
    ({**LATTICE, "box": [4]}, r"the lattice's box must be 2 integers >= 1, got \[4\]"),
    ({**LATTICE, "box": [10**9, 10**9]}, r"lattice's box of 1,000,000,000 x 1,000,000,000 cells"),
    ({**LATTICE, "cells": list(range(19))}, r"must list the cell of each of the 20 inputs"),
    ({**LATTICE, "cells": [0] * 20}, r"must be 20 distinct cells of the 4 x 5 box"),
    ({**LATTICE, "cells": [1, 0, *range(2, 20)]}, r"lies in lattice cell \[0, 0\] of its points, not \[0, 1\]"),
    ({**LATTICE, "version": 2}, r"'structure' has version 2; this metricdp reads version 1 only"),
    ({**LATTICE, "version": True}, r"'structure' has version True"),
    ({**LATTICE, "version": "1"}, r"'structure' has version '1'"),
    ("lattice-chain", r"metadata 'structure' must be an object"),
    ({**LATTICE, "proof": "trust-me"}, r"unknown proof 'trust-me'"),
    ({**LATTICE, "order": 100}, r"order must be an integer in \[1, 12\], got 100"),
    ({**LATTICE, "order": None}, r"order must be an integer in \[1, 12\], got None"),
    ({"version": 1, "proof": "post-processing", "base": LATTICE}, r"needs the remap's targets: 20 integers"),
    ({"version": 1, "proof": "post-processing", "base": {**LATTICE, "version": 0}},
     r"'structure.base' has version 0"),
])
def test_a_record_its_content_does_not_match_is_refused(lattice_file, structure, match) -> None:
    _rewrite(lattice_file, structure=structure)
    with pytest.raises(MechanismFileError, match=match):
        load_mechanism(lattice_file)


def test_a_cell_claim_that_folds_the_lattice_is_refused(lattice_file) -> None:
    _rewrite(lattice_file, meta={"space": {"metric": "euclidean", "cell": 200.0, "n": 20}})
    with pytest.raises(MechanismFileError, match=r"lies in lattice cell \[0, 0\] of its points, not \[0, 1\]"):
        load_mechanism(lattice_file)


def test_a_recorded_lattice_of_cell_centres_that_lies_is_refused(tmp_path, small_threshold) -> None:
    # haversine cells: the record's lattice is used as recorded; a wrong one only breaks the bound
    from metricdp.location.cells import planar_laplace_cells
    from metricdp.location.grid import CellGrid

    grid = CellGrid.over((40.70, -74.02, 40.74, -73.97), 1.0)
    space = MetricSpace.from_points(grid.centres, list(grid.labels), metric="haversine")
    path = tmp_path / "cells.npz"
    mech = planar_laplace_cells(space, 1.0)
    mech.save(path)
    assert load_mechanism(path).info["audit"] == "lattice-chain"
    record = dict(mech.info["structure"])
    n_cols = record["box"][1]
    cells = list(record["cells"])
    far = next(i for i, c in enumerate(cells) if c == record["box"][0] * n_cols - 1)  # the last cell
    cells[0], cells[far] = cells[far], cells[0]  # two opposite corners swapped
    _rewrite(path, structure={**record, "cells": cells})
    with pytest.raises(ClaimError, match=r"but the lattice-chain bound of its matrix is"):
        load_mechanism(path)


def test_a_kernel_claim_needs_distances_recomputed_bit_for_bit(tmp_path, small_threshold) -> None:
    path = tmp_path / "ex.npz"
    _built("exponential").save(path)
    d = _arrays(path)["distances"].copy()
    d[0, 1] = d[1, 0] = np.nextafter(d[0, 1], np.inf)  # within the loader's distance check, not the proof's
    _rewrite(path, distances=d)
    with pytest.raises(MechanismFileError, match=r"a kernel proof needs distances recomputed bit for bit"):
        load_mechanism(path)


def test_a_kernel_claim_at_another_inner_epsilon_is_refused(tmp_path, small_threshold) -> None:
    path = tmp_path / "ex.npz"
    _built("exponential").save(path)
    _rewrite(path, structure={**KERNEL, "inner_epsilon": 0.005})
    with pytest.raises(ClaimError, match=r"but the kernel bound of its matrix is"):
        load_mechanism(path)


def test_a_remap_whose_targets_were_changed_is_refused(tmp_path, small_threshold) -> None:
    path = tmp_path / "exr.npz"
    mech = _built("exponential+remap")
    mech.save(path)
    remap = dict(mech.info["remap"])
    targets = list(remap["targets"])
    moved = next(i for i, t in enumerate(targets) if targets.count(t) > 1)
    targets[moved] = next(z for z in range(GRID.n) if z not in targets)
    _rewrite(path, meta={"remap": {**remap, "targets": targets}})
    with pytest.raises(ClaimError, match=r"but the post-processing bound of its matrix is inf"):
        load_mechanism(path)


def test_a_lattice_clipped_by_a_region_loads_with_its_empty_cells_reintegrated(
        tmp_path, small_threshold, no_dense_audit) -> None:
    keep = [i for i in range(30) if not (i // 6 >= 3 and i % 6 >= 3)]  # an L: 24 of the 5 x 6 box's cells
    space = MetricSpace.from_points(np.asarray(MetricSpace.grid(5, 6, 100.0).points)[keep])
    prior = np.linspace(1.0, 3.0, space.n)
    mech = rm.bayesian_remap(pl.planar_laplace(space, 0.01), prior / prior.sum())
    path = tmp_path / "l.npz"
    mech.save(path)
    back = load_mechanism(path)
    assert back.info["audit"] == "lattice-chain" and back.info["audit_details"]["box"] == [5, 6]
    assert audit(mech.matrix, space.distances, normalize=True).epsilon <= back.info["epsilon_audit"] <= 0.01
    _rewrite(path, params={"inner_epsilon": 0.02})  # the empty cells' rows from another Laplace: no proof
    with pytest.raises(ClaimError, match=r"lattice-chain bound of its matrix is"):
        load_mechanism(path)


def test_the_cells_of_a_city_outline_build_and_load_through_the_lattice_chain(
        tmp_path, small_threshold, no_dense_audit) -> None:
    from metricdp.location.cells import planar_laplace_cells
    from metricdp.location.grid import CellGrid
    from metricdp.location.region import Region

    lat0, lon0 = 40.70, -74.00  # a hexagon about 10 x 10 km: 112 cells of 1 km in a 14 x 10 box
    ring = [[lon0 + 0.06 * math.cos(a) / math.cos(math.radians(lat0)), lat0 + 0.045 * math.sin(a)]
            for a in np.linspace(0, 2 * math.pi, 7)[:-1]]
    region = Region.from_geojson({"type": "Polygon", "coordinates": [[*ring, ring[0]]]}, name="hexagon")
    grid = CellGrid.over(region, 1.0)
    space = MetricSpace.from_points(grid.centres, list(grid.labels), metric="haversine")
    mech = rm.bayesian_remap(planar_laplace_cells(space, 1.0), np.full(space.n, 1 / space.n))
    assert space.n == 112 and mech.info["structure"]["base"]["box"] == [14, 10]
    assert sorted(mech.info["structure"]["base"]["cells"]) != list(range(140))  # a clipped box
    mech.save(tmp_path / "city.npz")
    back = load_mechanism(tmp_path / "city.npz")
    assert back.info["audit"] == "lattice-chain"
    assert audit(mech.matrix, space.distances, normalize=True).epsilon <= back.info["epsilon_audit"] <= 1.0


def test_a_trusted_space_is_what_the_proof_audits_against(lattice_file) -> None:
    back = load_mechanism(lattice_file, space=GRID)
    assert back.info["audit"] == "lattice-chain"
    closer = MetricSpace.grid(4, 5, 50.0)  # the same labels half as far apart: the matrix is no longer 0.01-mDP
    with pytest.raises(ClaimError, match=r"lattice-chain bound of its matrix is 0.0199"):
        load_mechanism(lattice_file, space=closer)


def test_a_mechanism_that_audits_itself_drops_a_structure_record() -> None:
    matrix = _built("exponential").matrix
    mech = Mechanism(matrix, GRID, 0.01, "exponential", {}, {"structure": KERNEL, "audit": "kernel"})
    assert "structure" not in mech.info and mech.info["audit"] == "dense"


@pytest.mark.slow
def test_five_thousand_cells_load_without_the_dense_audit(tmp_path, no_dense_audit) -> None:
    space = MetricSpace.grid(70, 72, 1.0)  # 5,040 cells: the lattice-chain proof at the production threshold
    mech = pl.planar_laplace(space, 1.0)
    mech.save(tmp_path / "big.npz")
    back = load_mechanism(tmp_path / "big.npz")  # no_dense_audit: the cubic audit (hours) would fail the test
    assert back.info["audit"] == "lattice-chain" and back.info["epsilon_audit"] <= 1.0
