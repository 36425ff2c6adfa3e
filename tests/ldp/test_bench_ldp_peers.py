"""benchmarks/bench_ldp_peers.py: the shared channel recipes, and a smoke run whose peer is absent."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_ldp_peers.py"


def load():
    spec = importlib.util.spec_from_file_location("bench_ldp_peers", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize(("name", "k"), [("krr", 10), ("line", 12), ("grid", 16), ("dense", 12)])
def test_channels_are_stochastic_and_frequencies_sum_to_one(name, k) -> None:
    bench = load()
    m = bench.channel(name, k)
    assert m.shape == (k, k) and (m > 0).all()
    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
    if name == "krr":  # k-RR at eps 1: e / (e + k - 1) on the diagonal
        assert m[0, 0] == pytest.approx(np.e / (np.e + k - 1))
    else:  # exp(-distance), rows normalised: weight 1 on the diagonal, so M[x, y] / M[x, x] is symmetric
        r = m / np.diagonal(m)[:, None]
        np.testing.assert_allclose(r, r.T, rtol=1e-12)
        assert name == "dense" or m[0, 1] > m[0, k - 1]  # on the line and the grid the weight falls with the index
    f = bench.frequencies(m)
    assert f.shape == (k,) and f.sum() == pytest.approx(1.0)


def test_smoke_run_without_the_peer(monkeypatch, capsys) -> None:
    # the main interpreter has no multi-freq-ldpy: the worker cannot start, the peer's cells say so
    bench = load()
    monkeypatch.delenv("MFL_PYTHON", raising=False)
    bench.main(["--quick", "--ks", "10", "--channels", "krr,line", "--release-ks", "10", "--no-hh",
                "--peer-python", sys.executable])
    out = capsys.readouterr().out
    assert "multi-freq-ldpy rows skipped" in out and "could not start the worker" in out
    rows = [line for line in out.splitlines() if line.startswith(("| krr", "| line", "| ss", "| oue"))]
    assert len(rows) == 4 and all("| absent | - |" in r for r in rows)
    bench.main(["--quick", "--ks", "10", "--channels", "krr", "--release-ks", "10", "--no-hh"])
    assert "no peer interpreter given" in capsys.readouterr().out
