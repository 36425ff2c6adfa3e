"""Attacks and utility measures on paired traces: hand-computed values on tiny traces, the
averaging attack's 1/sqrt(k) law on seeded planar Laplace releases, and the pairing errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.location.traces import (
    averaging_attack,
    displacement_km,
    evaluate_traces,
    grid_cells,
    pair_traces,
    place_adversary,
    top_places,
    trip_length_error,
    visit_count_error,
)
from metricdp.mechanisms.planar_laplace import sample_planar_laplace_latlon
from metricdp.spaces import EARTH_RADIUS_KM

DEG_KM = EARTH_RADIUS_KM * math.pi / 180  # one degree of a great circle: 111.19508 km


def same(person, key, latlon):
    return pair_traces(person, key, latlon, person, key, latlon)


# ------------------------------------------------------------------------------ pairing
def test_pairs_by_person_and_key_whatever_the_row_order():
    p = pair_traces(["b", "a", "a"], ["1", "2", "1"], [[0, 0], [0, 2], [0, 1]],
                    ["a", "b", "a"], ["1", "1", "2"], [[1, 1], [1, 0], [1, 2]])
    assert p.person.tolist() == ["a", "a", "b"] and p.key.tolist() == ["1", "2", "1"]
    assert p.true.tolist() == [[0, 1], [0, 2], [0, 0]]
    assert p.released.tolist() == [[1, 1], [1, 2], [1, 0]]
    assert [(name, rows.start, rows.stop) for name, rows in p.groups()] == [("a", 0, 2), ("b", 2, 3)]


def test_numeric_keys_order_numerically_text_keys_as_text():
    p = same(["a"] * 3, ["10", "9", "100"], [[0, 0], [0, 1], [0, 2]])
    assert p.key.tolist() == ["9", "10", "100"]
    p = same(["a"] * 2, ["2020-12-01T10:00:00", "2020-11-30T23:59:59"], [[0, 0], [0, 1]])
    assert p.key.tolist() == ["2020-11-30T23:59:59", "2020-12-01T10:00:00"]


@pytest.mark.parametrize(
    ("true", "released", "message"),
    [
        ((["a", "a"], ["1", "1"], [[0, 0], [0, 1]]), (["a"], ["1"], [[0, 0]]),
         "true fixes: person 'a' has key '1' twice (rows 0 and 1)"),
        ((["a"], ["1"], [[0, 0]]), (["a", "a"], ["1", "1"], [[0, 0], [0, 1]]),
         "released fixes: person 'a' has key '1' twice (rows 0 and 1)"),
        ((["a", "b"], ["1", "1"], [[0, 0], [0, 1]]), (["a"], ["1"], [[0, 0]]),
         "true fixes: person 'b', key '1' (row 1) has no released fix"),
        ((["a"], ["1"], [[0, 0]]), (["a", "a"], ["1", "2"], [[0, 0], [0, 1]]),
         "released fixes: person 'a', key '2' (row 1) has no true fix"),
        ((["a"], ["1", "2"], [[0, 0]]), (["a"], ["1"], [[0, 0]]), "true fixes: 1 persons, 2 keys and 1 coordinates"),
        ((["a"], ["1"], [[0, 0]]), (["a"], ["1"], [[91, 0]]), "released latlon row 0 is not a (lat, lon)"),
    ],
)
def test_pairing_errors_name_the_culprit(true, released, message):
    with pytest.raises(ValidationError) as info:
        pair_traces(*true, *released)
    assert message in str(info.value)


# ------------------------------------------------------------------------------ utility
def test_displacement_is_the_great_circle_distance_per_fix():
    p = pair_traces(["a", "b"], [1, 1], [[0, 0], [10, 20]], ["a", "b"], [1, 1], [[1, 0], [10, 20]])
    assert displacement_km(p) == pytest.approx([DEG_KM, 0.0], abs=1e-9)


def test_trip_lengths_of_three_persons():
    # a: along the equator 0 -> 1 -> 2 degrees (2 deg), released 0 -> 0 -> 2 (also 2 deg): no error.
    # b: stands still, released moves 1 deg north and back: true 0 km, relative error undefined.
    # c: one fix: no trip at all.
    true = [[0, 0], [0, 1], [0, 2], [5, 5], [5, 5], [7, 7]]
    rel = [[0, 0], [0, 0], [0, 2], [5, 5], [6, 5], [8, 8]]
    person, key = ["a", "a", "a", "b", "b", "c"], [1, 2, 3, 1, 2, 1]
    e = trip_length_error(pair_traces(person, key, true, person, key, rel))
    assert e.persons == ("a", "b", "c")
    assert e.true_km == pytest.approx([2 * DEG_KM, 0, 0]) and e.released_km == pytest.approx([2 * DEG_KM, DEG_KM, 0])
    assert e.abs_error == pytest.approx([0, DEG_KM, 0], abs=1e-9)
    assert e.relative[0] == pytest.approx(0, abs=1e-12) and np.isnan(e.relative[1:]).all()


def test_grid_cells_are_fixed_whatever_the_data():
    a = grid_cells(np.array([[40.71, -74.0]]), 1.0)
    b = grid_cells(np.array([[40.71, -74.0], [-33.9, 151.2], [0.0, 0.0]]), 1.0)
    assert a.tolist() == b[:1].tolist()
    assert b[2].tolist() == [0, 0]
    # a 1 km cell is 1/DEG_KM degrees of latitude high
    assert grid_cells(np.array([[0.999 / DEG_KM, 0], [1.001 / DEG_KM, 0]]), 1.0)[:, 0].tolist() == [0, 1]


def test_visit_counts_of_three_persons():
    # all fixes in cell (0, 0) of the 1 km grid except the one release moved 10 km north:
    # counts true {c0: 4}, released {c0: 3, c1: 1} -> L1 2, total variation 2 / (2 * 4)
    small = [[0.001, 0.001], [0.002, 0.002], [0.003, 0.003], [0.004, 0.004]]
    moved = [*small[:3], [0.094, 0.004]]
    person, key = ["a", "b", "b", "c"], [1, 1, 2, 1]
    e = visit_count_error(pair_traces(person, key, small, person, key, moved), cell_km=1.0)
    assert (e.total_variation, e.l1_counts, e.cells, e.cell_km) == (0.25, 2, 2, 1.0)
    with pytest.raises(ValidationError, match="cell_km"):
        visit_count_error(pair_traces(person, key, small, person, key, moved), cell_km=0)


# ------------------------------------------------------------------------------ places
def test_top_places_densest_first_and_min_visits():
    home = [[40.0, -74.0]] * 5
    work = [[40.1, -74.1]] * 3
    stray = [[41.0, -75.0]]
    pl = top_places(home + work + stray, 3, radius_km=0.5)
    assert pl.counts.tolist() == [5, 3, 1]
    assert pl.centres == pytest.approx(np.array([home[0], work[0], stray[0]]), abs=1e-9)
    assert top_places(home + work + stray, 3, radius_km=0.5, min_visits=2).counts.tolist() == [5, 3]
    assert top_places(np.empty((0, 2)), 2, radius_km=1.0).counts.tolist() == []


def test_top_place_is_the_mean_of_its_fixes():
    # four fixes 0.2 km around a point, each on one axis: their mean is the point
    d = 0.2 / DEG_KM
    pts = [[d, 0], [-d, 0], [0, d], [0, -d]]
    pl = top_places(pts, 1, radius_km=1.0)
    assert pl.counts.tolist() == [4] and pl.centres[0] == pytest.approx([0, 0], abs=1e-12)


def test_exact_releases_are_not_attacked_and_a_shift_is_its_own_error():
    # a: 6 fixes at home, 5 at work; b: 5 at one place; c: 2 fixes, no place with 5 visits
    true = [[40.0, -74.0]] * 6 + [[40.2, -74.2]] * 5 + [[35.0, 139.0]] * 5 + [[0.0, 0.0], [1.0, 1.0]]
    person = ["a"] * 11 + ["b"] * 5 + ["c"] * 2
    key = list(range(len(person)))
    exact = averaging_attack(same(person, key, true))
    assert exact.persons == ("a", "b")
    assert exact.errors_km == pytest.approx([0, 0, 0], abs=1e-9)
    north = np.asarray(true) + np.array([1.0 / DEG_KM, 0.0])  # every release 1 km north of its fix
    shifted = averaging_attack(pair_traces(person, key, true, person, key, north))
    assert shifted.errors_km == pytest.approx([1, 1, 1], rel=1e-6)
    assert shifted.person_error_km == pytest.approx([1, 1], rel=1e-6)
    assert shifted.place_person.tolist() == [0, 0, 1]
    assert shifted.summary() == {"persons": 2, "places": 3,
                                 "per_place": pytest.approx({"median_km": 1, "mean_km": 1}),
                                 "per_person": pytest.approx({"median_km": 1, "mean_km": 1})}


def _one_place_releases(k: int, persons: int, epsilon: float, seed: int):
    place = np.array([40.7, -74.0])
    true = np.tile(place, (k * persons, 1))
    person = np.repeat([f"p{i}" for i in range(persons)], k)
    key = np.tile(np.arange(k), persons)
    released = sample_planar_laplace_latlon(true, epsilon, rng=seed)
    return pair_traces(person, key, true, person, key, released)


def test_averaging_attack_on_the_plain_mean_meets_the_closed_form():
    # A radius far beyond the noise makes the estimate the mean of the k releases, whose
    # mean squared error is E rho^2 / k = 6 / (k eps^2) (Gamma(2, 1/eps) radius).
    eps, persons = 2.0, 400
    for k in (4, 64):
        attack = averaging_attack(_one_place_releases(k, persons, eps, seed=k), place_radius_km=100.0,
                                  min_visits=1)
        mse = float(np.mean(attack.errors_km ** 2))
        assert mse * k * eps**2 == pytest.approx(6.0, rel=0.2), k


def test_averaging_attack_error_shrinks_like_one_over_sqrt_k():
    # The attacker's radius matched to the noise (2 / eps): a trimmed mean, same 1/sqrt(k) law.
    eps, persons = 1.0, 60
    ks = (16, 64, 256, 1024)
    mean = [float(averaging_attack(_one_place_releases(k, persons, eps, seed=7 + k), epsilon_per_km=eps)
                  .errors_km.mean()) for k in ks]
    scaled = np.asarray(mean) * np.sqrt(ks)
    assert scaled.max() / scaled.min() < 1.5, scaled
    assert 5.0 < mean[0] / mean[-1] < 12.8, mean  # sqrt(1024 / 16) = 8


def test_place_adversary_far_places_are_found_close_ones_are_guessed_by_the_prior():
    person = ["a"] * 4
    far = [[0.0, 0.0]] * 3 + [[0.0, 100 / DEG_KM]]  # two places 100 km apart, prior (3/4, 1/4)
    adv = place_adversary(same(person, range(4), far), 1.0, min_visits=1)
    assert adv.persons == ("a",)
    assert adv.reidentification[0] == pytest.approx(1.0, abs=1e-6)
    assert adv.expected_error_km[0] == pytest.approx(0.0, abs=1e-3)
    assert adv.prior_error_km[0] == pytest.approx(25.0, rel=1e-3)  # guess the likelier place: wrong 1/4 of 100 km
    assert adv.prior_reidentification[0] == 0.75
    close = [[0.0, 0.0]] * 3 + [[0.0, 1 / DEG_KM]]  # 1 km apart under noise of mean radius 20 km
    adv = place_adversary(same(person, range(4), close), 0.1, min_visits=1, place_radius_km=0.1)
    assert 0.75 <= adv.reidentification[0] < 0.8
    assert adv.expected_error_km[0] == pytest.approx(adv.prior_error_km[0], rel=0.1)
    one_place = place_adversary(same(["a", "a"], [1, 2], [[0, 0], [0, 0]]), 1.0, min_visits=1)
    assert one_place.persons == ()  # one place: nothing to tell apart


def test_evaluate_traces_is_json_ready_and_consistent():
    pair = _one_place_releases(8, 3, 1.0, seed=1)
    out = evaluate_traces(pair, epsilon_per_km=1.0, min_visits=1)
    json.dumps(out, allow_nan=False)
    assert out["fixes"] == 24 and out["persons"] == 3 and len(out["per_person"]) == 3
    assert out["displacement_km"]["mean"] == pytest.approx(float(displacement_km(pair).mean()))
    assert out["averaging_attack"] == averaging_attack(pair, epsilon_per_km=1.0, min_visits=1).summary()
    assert out["settings"]["attack_radius_km"] == 2.0
    assert "place_adversary" in out and "place_adversary" not in evaluate_traces(pair, min_visits=1)


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.floats(-80, 80), st.floats(-179, 179)), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
    st.floats(0.0, 0.5),
)
@settings(max_examples=60, deadline=None)
def test_pairing_and_measures_do_not_depend_on_row_order(rows, random, shift):
    person = [r[0] for r in rows]
    key = list(range(len(rows)))  # distinct keys: every (person, key) once
    true = np.array([[r[1], r[2]] for r in rows])
    released = true + np.array([shift, 0.0])
    order = list(range(len(rows)))
    random.shuffle(order)
    a = pair_traces(person, key, true, person, key, released)
    b = pair_traces(person, key, true, [person[i] for i in order], [key[i] for i in order], released[order])
    assert a.person.tolist() == b.person.tolist() and a.released.tolist() == b.released.tolist()
    assert displacement_km(a) == pytest.approx(np.full(len(rows), shift * DEG_KM), abs=1e-6)
    tv = visit_count_error(a, cell_km=5.0).total_variation
    assert 0.0 <= tv <= 1.0 and (shift > 0 or tv == 0.0)
    assert (trip_length_error(same(person, key, true)).abs_error == 0).all()


# ------------------------------------------------------------------------------ reading
def test_read_traces_names_a_bad_coordinate_where_its_reader_places_it(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from metricdp.location.traces import read_traces

    text = tmp_path / "t.csv"
    text.write_text('user,t,lat,lon\na,1,48.8,2.3\n"b\nc",2,48.8,2.3\na,3,north,2.3\n')
    with pytest.raises(ValidationError, match=r"t\.csv: line 5: column 'lat' is not a number: 'north'"):
        read_traces(text, person="user", key="t")  # the quoted line break counts: the record starts on line 5
    typed = tmp_path / "t.parquet"
    pq.write_table(pa.table({"user": ["a", "a"], "t": [1, 2], "lat": [48.8, 95.0], "lon": [2.3, 2.3]}), typed)
    with pytest.raises(ValidationError, match=r"t\.parquet: data row 2: column 'lat' is not a latitude"):
        read_traces(typed, person="user", key="t")
    ok = tmp_path / "ok.csv"
    ok.write_text("user,t,lat,lon\na,1,1.5,2\nb,2,0,0\n")
    person, key, latlon = read_traces(ok, person="user", key="t")
    assert person.tolist() == ["a", "b"] and key.tolist() == ["1", "2"] and latlon.tolist() == [[1.5, 2.0], [0, 0]]
