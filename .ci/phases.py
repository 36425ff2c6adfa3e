"""pytest plugin of the CI phases (.ci/fast, .ci/full): no test runs twice and none is left out.

The fast phase deselects the ``slow`` tests (``-m "not slow"``) and records, in the file named by
``METRICDP_CI_SKIPLOG``, every test or module it skipped (a missing optional package or system
tool: Chromium, a Java runtime). The full phase, with ``METRICDP_CI_SELECT`` naming that record,
keeps only the ``slow`` tests and the recorded ones, so that together the two phases run the suite
exactly once. Loaded with ``-p phases`` and ``.ci`` on ``PYTHONPATH``; inert without the variables.

Under pytest-xdist (README's ``-n auto``) each worker collects and runs its share, and the controller
only hears of a skipped module once per distinct reason; so every process records what it saw in its
own part file (``LOG.gw0``, ...), and the controller, which finishes last, merges the parts into LOG.
"""

from __future__ import annotations

import glob
import os

import pytest

_LOG = os.environ.get("METRICDP_CI_SKIPLOG")
_SELECT = os.environ.get("METRICDP_CI_SELECT")
_skipped: list[str] = []


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if _LOG and report.skipped:  # a module skipped as a whole (importorskip at import)
        _skipped.append(report.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _LOG and report.skipped and not hasattr(report, "wasxfail") and not _skipped_by_doctest_option(report):
        _skipped.append(report.nodeid)


def _skipped_by_doctest_option(report: pytest.TestReport) -> bool:
    """A doctest whose examples all carry ``+SKIP``: skipped in every phase, nothing to rerun."""
    longrepr = report.longrepr
    return isinstance(longrepr, tuple) and len(longrepr) == 3 and "+SKIP" in str(longrepr[2])


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _LOG:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # a worker writes its part; the controller merges the parts after the workers stop
        with open(f"{_LOG}.{worker}", "w", encoding="utf-8") as f:
            f.writelines(nodeid + "\n" for nodeid in _skipped)
        return
    nodeids = list(_skipped)
    for part in sorted(glob.glob(glob.escape(_LOG) + ".gw*")):
        with open(part, encoding="utf-8") as f:
            nodeids.extend(line.rstrip("\n") for line in f if line.strip())
        os.remove(part)
    with open(_LOG, "w", encoding="utf-8") as f:
        f.writelines(nodeid + "\n" for nodeid in dict.fromkeys(nodeids))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _SELECT:
        return
    with open(_SELECT, encoding="utf-8") as f:
        recorded = {line.rstrip("\n") for line in f if line.strip()}
    modules = tuple(nodeid + "::" for nodeid in recorded if "::" not in nodeid)

    def wanted(item: pytest.Item) -> bool:
        return item.get_closest_marker("slow") is not None or item.nodeid in recorded or item.nodeid.startswith(modules)

    keep = [item for item in items if wanted(item)]
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
