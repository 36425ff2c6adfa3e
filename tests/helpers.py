"""Test helpers, independent of metricdp's own code paths.

``brute_force_epsilon`` is a second, deliberately naive audit (a Python loop over
output columns) used as an oracle for :mod:`metricdp.audit` and for builders.

``needs``, ``skip_unless`` (``import_or_skip``) and ``optional_dependency`` are the one way a test says what
it needs beyond the core install (an extra of ``pyproject.toml``, a package only the
``test`` extra installs, or a system program), so that the suite passes on any install:
a test whose requirement is missing skips with the reason and the command that installs
it, and where the library itself must refuse without the extra, the test asserts the
library's missing-extra error instead (OpenDP's ``test/helpers.py: optional_dependency``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import shutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from metricdp._optional import EXTRAS, MissingExtraError, available, install_hint
from metricdp.spaces import MetricSpace

#: Packages that some tests use and no extra of the library provides (``[test]`` installs
#: them): top-level module -> distribution name.
TEST_PACKAGES: dict[str, str] = {"sklearn": "scikit-learn"}


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    return shutil.which("java") or (shutil.which("java", path=os.path.join(home, "bin")) if home else None)


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


#: System programs that some tests drive: name -> (how to find it, what uses it and how to install it).
PROGRAMS: dict[str, tuple[Callable[[], str | None], str]] = {
    "java": (_java, "Spark runs on Java: apt-get install openjdk-17-jre-headless"),
    "chromium": (_chromium, "the report is rendered in headless Chromium: apt-get install chromium"),
}


def program(name: str) -> str | None:
    """The path of system program ``name`` (a key of :data:`PROGRAMS`), or ``None``."""
    return PROGRAMS[name][0]()


def missing(*requirements: str) -> str | None:
    """Why a test needing ``requirements`` cannot run here (the first one missing), or ``None``.

    A requirement is an extra (a key of :data:`metricdp._optional.EXTRAS`), a test-only
    package (a key of :data:`TEST_PACKAGES`) or a system program (a key of :data:`PROGRAMS`).
    """
    for name in requirements:
        if name in EXTRAS:
            if not available(name):
                return f"needs the {name!r} extra: pip install '.[{name}]'"
        elif name in TEST_PACKAGES:
            if importlib.util.find_spec(name) is None:
                return f"needs {TEST_PACKAGES[name]} (a test dependency): pip install '.[test]'"
        elif name in PROGRAMS:
            if program(name) is None:
                return f"needs the program {name!r} ({PROGRAMS[name][1]})"
        else:
            raise ValueError(f"unknown requirement {name!r}: not an extra, a test package or a program")
    return None


def needs(*requirements: str) -> pytest.MarkDecorator:
    """A mark that skips a test (a module as ``pytestmark``, a ``pytest.param``) unless ``requirements`` are met."""
    reason = missing(*requirements)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def skip_unless(*requirements: str) -> None:
    """Skip the running test (or, at import, the whole module) unless ``requirements`` are met."""
    reason = missing(*requirements)
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)


def import_or_skip(module: str, *requirements: str) -> ModuleType:
    """``module``, imported once ``requirements`` are met; else the test (or module) is skipped with the reason."""
    skip_unless(*requirements)
    return importlib.import_module(module)


def optional_dependency(extra: str) -> contextlib.AbstractContextManager[Any]:
    """With ``extra`` installed nothing; without it the block must raise the library's missing-extra error.

    The error must be :class:`metricdp._optional.MissingExtraError` naming both ways to install
    ``extra``; the rest of the block then does not run (there is nothing to check without it).
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    if available(extra):
        return contextlib.nullcontext()
    return pytest.raises(MissingExtraError, match=re.escape(install_hint(extra)))


def brute_force_epsilon(matrix: np.ndarray, distances: np.ndarray) -> float:
    """max over w, u != v of log(M[u,w] / M[v,w]) / d(u,v); inf when M[u,w] > 0 = M[v,w].

    ``matrix`` is (n, n) or (n, m) (a separate output set: w ranges over the m outputs).
    """
    n = matrix.shape[0]
    worst = 0.0
    for w in range(matrix.shape[1]):
        for u in range(n):
            for v in range(n):
                if u == v or matrix[u, w] == 0:
                    continue
                if matrix[v, w] == 0:
                    return float("inf")
                worst = max(worst, float(np.log(matrix[u, w] / matrix[v, w]) / distances[u, v]))
    return worst


def random_space(seed: int, n: int, dim: int = 2, clustered: bool = False) -> MetricSpace:
    """Gaussian points (optionally a spread part plus a tight cluster), Euclidean."""
    g = np.random.default_rng(seed)
    if clustered:
        k = n // 2
        x = np.r_[g.normal(0, 1, (n - k, dim)), g.normal(4, 0.05, (k, dim))]
    else:
        x = g.normal(0, 1, (n, dim))
    return MetricSpace.from_points(x)


def assert_private(mechanism, epsilon: float | None = None, rtol: float = 1e-9) -> None:
    """The mechanism's matrix passes the naive audit at its epsilon (small n only)."""
    eps = mechanism.epsilon if epsilon is None else epsilon
    got = brute_force_epsilon(np.asarray(mechanism.matrix), np.asarray(mechanism.space.distances))
    assert got <= eps * (1 + rtol), f"{mechanism!r}: naive audit gives {got!r} > {eps!r}"
    assert np.allclose(np.asarray(mechanism.matrix).sum(axis=1), 1.0, atol=1e-9)
