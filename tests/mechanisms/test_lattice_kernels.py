"""The compiled kernels make exactly the numpy reference's decisions (skipped without numba)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from metricdp.location.projection import TangentPlane
from metricdp.mechanisms._lattice_kernels import KERNELS
from metricdp.mechanisms.lattice_batch import LatticeSampler, exp_neg_float
from metricdp.tabular import csvsplit
from metricdp.tabular.decimal_text import format_fixed
from tests.helpers import needs

pytestmark = needs("fast")

ALPHAS = [Fraction(1, 1000), Fraction(1, 2), Fraction(5), Fraction(1, 10**6)]


@pytest.mark.parametrize("alpha", ALPHAS)
def test_level_count_equals_numpy(alpha):
    s = LatticeSampler(alpha)
    w = np.random.default_rng(0).integers(0, 2**64, 50_000, dtype=np.uint64)
    levels = [s._m] + ([s._r] if s._r is not None else [])
    for level in levels:
        # words equal to table entries (the exact path's trigger) and their neighbours too
        k = min(50, level.size)
        w2 = np.concatenate([w, level.desc[:k], level.desc[:k] + np.uint64(1), level.desc[:k] - np.uint64(1)])
        c1, e1 = level.certain(w2)
        c2, e2 = KERNELS["level_count"](w2, level.desc, level.mode, level.p1, level.p2)
        np.testing.assert_array_equal(c1, c2)
        np.testing.assert_array_equal(e1, e2)
        assert e1[len(w):len(w) + k].all()


@pytest.mark.parametrize("alpha", ALPHAS[:3])
def test_accept_equals_numpy_including_words_above_2_63(alpha):
    s = LatticeSampler(alpha)
    g = np.random.default_rng(1)
    scale = max(1, int(3 / float(alpha)))
    a, b = g.integers(-scale, scale + 1, 50_000), g.integers(-scale, scale + 1, 50_000)
    a[:3], b[:3] = [2**31, 0, 0], [0, 0, 3]
    w = g.integers(0, 2**64, 50_000, dtype=np.uint64)
    acc1, un1 = s._accept_float(a, b, w)
    acc2, un2 = KERNELS["accept"](a, b, w, s.alpha_f, s.beta_f, KERNELS["coef"])
    np.testing.assert_array_equal(acc1, acc2)
    np.testing.assert_array_equal(un1, un2)
    assert un1[0] and acc1[1]


def test_exp_equals_numpy():
    x = np.linspace(0.0, 60.0, 20_001)
    from metricdp.mechanisms._lattice_kernels import _exp_neg

    got = np.array([_exp_neg(v, KERNELS["coef"]) for v in x])
    np.testing.assert_array_equal(got, exp_neg_float(x))


def test_projection_kernels_match_tangent_plane():
    plane = TangentPlane(48.8566, 2.3522)
    g = np.random.default_rng(2)
    pts = np.column_stack([48.8566 + g.normal(0, 2, 5000), 2.3522 + g.normal(0, 3, 5000)])
    x, y = KERNELS["forward"](pts[:, 0].copy(), pts[:, 1].copy(), 48.8566, 2.3522)
    np.testing.assert_allclose(np.column_stack([x, y]), plane.forward(pts), atol=1e-9)
    lat, lon = KERNELS["inverse"](x, y, 48.8566, 2.3522)
    np.testing.assert_allclose(np.column_stack([lat, lon]), plane.inverse(np.column_stack([x, y])), atol=1e-11)


def test_splice_points_equals_format_fixed_and_splice():
    buf = np.frombuffer(b"a,1.5,x,2.5\nbb,-3.25,y,4\n", dtype=np.uint8)
    starts, stops = np.array([0, 2, 8, 12, 15, 23]), np.array([2, 5, 11, 15, 20, 24])
    kind = np.array([-1, 0, 1, -1, 0, 1])
    row = np.array([0, 0, 0, 1, 1, 1])
    vals = np.array([[48.1234567, -0.0000004], [-12.5, 179.9999996]])
    for digits in (0, 3, 6):
        n = np.rint(vals * 10.0**digits).astype(np.int64)
        got = bytes(KERNELS["splice_points"](buf, len(buf), starts, stops, row, kind, n[:, 0].copy(),
                                             n[:, 1].copy(), digits))
        data, off, _ = format_fixed(np.concatenate([vals[:, 0], vals[:, 1]]), digits)
        off = np.append(off, off[-1])
        choice = np.where(kind < 0, 4, kind * 2 + row)
        want = bytes(csvsplit.splice(buf, len(buf), starts, stops, data, off, choice))
        assert got == want, (digits, got, want)


def test_gather_fields_equals_field_values():
    buf = np.frombuffer(b'12.5,x,-3\n,y,4.25\n"7",z,8\n', dtype=np.uint8)
    fs, fe = np.array([0, 10, 18]), np.array([4, 10, 21])
    data, off, plain = KERNELS["gather_fields"](buf, fs[:2], fe[:2])
    d2, o2, quoted, _ = csvsplit.field_values(buf, fs[:2], fe[:2])
    assert plain and bytes(data) == bytes(d2) and off.tolist() == o2.tolist() and not quoted.any()
    assert not KERNELS["gather_fields"](buf, fs, fe)[2]  # a quoted field: numpy unquotes


@pytest.mark.parametrize("alpha", ALPHAS)
def test_sampler_draws_the_same_offsets_with_and_without_numba(alpha, monkeypatch):
    from metricdp.mechanisms import lattice_batch

    s = LatticeSampler(alpha)
    with_kernels = s.offsets(20_000, np.random.default_rng(11))
    monkeypatch.setattr(lattice_batch, "_KERNELS", None)
    np.testing.assert_array_equal(s.offsets(20_000, np.random.default_rng(11)), with_kernels)


def test_points_file_bytes_are_the_same_with_and_without_numba(tmp_path, monkeypatch):
    from metricdp.location import lattice
    from metricdp.location.lattice import LatticePlane
    from metricdp.location.release import PointSettings, make_release
    from metricdp.mechanisms import lattice_batch
    from metricdp.pipeline import run as points
    from metricdp.streaming.points import privatize_points_file

    src = tmp_path / "in.csv"
    g = np.random.default_rng(3)
    rows = [f"u{i},{48.85 + g.normal(0, 0.05):.6f},x,{2.35 + g.normal(0, 0.05):.6f}" for i in range(3000)]
    src.write_text("id,lat,note,lon\n" + "\n".join(rows) + "\n")
    settings = PointSettings(0.5, LatticePlane(48.85, 2.35, cell_km=0.01))
    outs = []
    monkeypatch.setattr(points, "COMPILED_FROM_BYTES", 0)  # the compiled reader and writer at any size
    for kernels in (True, False):
        if not kernels:
            for module in (lattice_batch, lattice, points):
                monkeypatch.setattr(module, "_KERNELS", None)
        out = tmp_path / f"out-{kernels}.csv"
        privatize_points_file(src, "lat", "lon", out, make_release(settings, np.random.default_rng(5)),
                              keep=["id"], drop=["note"], chunk_rows=700)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
