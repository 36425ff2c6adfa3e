"""The LP benchmark behind ``metricdp bench lp``.

The harness of one benchmark: its series table, the child process that builds once, and
the parent that sweeps n and epsilon and hands each finished row on. The data sets are in
:mod:`.bench_lp_data`, the row's record and renderings (table, report, plot, checkpoint) in
:mod:`.bench_lp_rows`; both are re-exported here.

For every size n and every LP mechanism it builds the mechanism with the fast and the
reference (``formulation="full"``) formulation side by side, on the same space, in one
run, and reports one row per build: n, mechanism, formulation, LP variables,
constraints, non-zeros, constraint-generation rounds, seconds, peak memory, worst-case
and 95%-quantile loss, and the audited eps.

Every build runs in a fresh child interpreter (``python -c``, started with
:mod:`subprocess`; no ``multiprocessing``, so callers need no ``__main__`` guard), so that

* the peak resident memory is the child's own high-water mark (``VmHWM``, see
  :func:`_rss_mib`) -- per build, not the maximum over the whole run (it includes the
  interpreter, numpy/scipy/HiGHS and the space: ``baseline_mib`` is the same figure
  measured just before the build);
* a build that overruns its time limit is stopped: the limit goes to HiGHS as each LP's
  time limit (a time-out is then a clean :class:`~metricdp.errors.SolverError`), and the
  parent kills a child that is still running ``limit + grace`` seconds after the build
  started (builders that solve several LPs may exceed one LP's limit);
* one formulation's memory or a crash cannot disturb the next.

A mechanism/formulation series stops at its first time-out, as in the paper's Table 2:
larger sizes are reported as skipped.

Mechanisms (``NAME[@R]``, ``@R`` overriding the number of neighbours r):

* ``optimal`` -- OPTMech, worst-case objective;
* ``constopt`` -- ConstOPTMech with the paper fit over three lambda values (0.001, 0.1
  and 1; r = 10 by default);
* ``constopt-normalised`` -- ConstOPTMech with the exact ``normalised`` fit;
* ``optimal-expected`` -- OPTMech, expected objective under the dataset's prior (the
  ``grid`` data's Dirichlet(0.5) prior, the ``geo`` data's population; uniform otherwise);
* ``spanner`` -- SpannerMech (one formulation only: ``default``).

Sweeps over eps: ``epsilons`` gives one row per (n, eps, mechanism, formulation), each
with the simplex iterations, the objective (worst-case loss, or expected loss under the
prior) and its relative gap to the reference (``full``) build's objective where that ran.
``on_row`` sees each row as soon as it is finished: :func:`append_checkpoint` checkpoints it, so
a crash late in a long run loses nothing; :func:`plot_seconds` draws seconds against eps.
"""

from __future__ import annotations

import resource
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._jsonable import jsonable
from .._validation import check_epsilon, check_int
from ..errors import SolverError, SolverTimeLimitError, ValidationError
from ..mechanisms import registry
from ..spaces import MetricSpace
from .bench_lp_data import DATASETS, bench_data, bench_space
from .bench_lp_rows import (
    COLUMNS,
    BenchRow,
    append_checkpoint,
    machine_info,
    markdown_report,
    markdown_table,
    plot_seconds,
    table_rows,
)

__all__ = [
    "COLUMNS",
    "DATASETS",
    "MECHANISMS",
    "BenchRow",
    "append_checkpoint",
    "bench_data",
    "bench_space",
    "machine_info",
    "markdown_report",
    "markdown_table",
    "parse_mechanism",
    "planned_builds",
    "plot_seconds",
    "run_bench",
    "sizes_for",
    "table_rows",
]

#: Benchmark series -> (registry family, fixed options, formulations it has).
MECHANISMS: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "optimal": ("optimal", {}, ("fast", "full", "block-ipm")),
    "optimal-expected": ("optimal", {"objective": "expected"}, ("fast", "full", "block-ipm", "column-generation",
                                                                "dantzig-wolfe")),
    "constopt": ("constopt", {"fit": "paper", "lambdas": (0.001, 0.1, 1.0)}, ("fast", "full")),
    "constopt-normalised": ("constopt", {"fit": "normalised"}, ("fast", "full")),
    "spanner": ("spanner", {}, ("default",)),
}
FORMULATIONS = ("fast", "full", "block-ipm", "column-generation", "dantzig-wolfe")


def parse_mechanism(token: str, neighbours: int) -> tuple[str, str, dict[str, Any], tuple[str, ...]]:
    """``NAME[@R]`` -> (label, family, options, formulations); the error lists the names."""
    name, _, r = token.strip().partition("@")
    if name not in MECHANISMS:
        raise ValidationError(
            f"mechanism must be one of {', '.join(MECHANISMS)} (optionally NAME@R), got {token!r}"
        )
    family, options, forms = MECHANISMS[name]
    options = dict(options)
    if family == "constopt":
        value: object = (int(r) if r.isdigit() else r) if r else neighbours
        options["neighbours"] = check_int(value, f"r of {token!r}", minimum=1)
        label = f"{name} r={options['neighbours']}"
    elif r:
        raise ValidationError(f"only constopt takes @R (neighbours), got {token!r}")
    else:
        label = name
    return label, family, options, forms


def sizes_for(sizes: Sequence[int] | Mapping[str, Sequence[int]], token: str) -> list[int]:
    """The sizes of one mechanism token (see :func:`run_bench`'s ``sizes``)."""
    if isinstance(sizes, Mapping):
        raw = sizes.get(token, sizes.get(token.partition("@")[0], sizes.get("*", ())))
        if not raw:  # a mechanism the user named must not vanish from the run
            named = ", ".join(str(k) for k in sizes)
            raise ValidationError(f"no sizes for mechanism {token!r}: sizes names only {named} "
                                  f"(add {token}=N,... or plain N,... for every mechanism)")
    else:
        raw = sizes
    return [check_int(n, "size", minimum=2) for n in raw]


def planned_builds(sizes: Sequence[int] | Mapping[str, Sequence[int]], mechanisms: Sequence[str],
                   formulations: Sequence[str], neighbours: int = 10) -> int:
    """How many builds :func:`run_bench` will start at most (for a progress bar)."""
    total = 0
    for tok in mechanisms:
        forms = parse_mechanism(tok, neighbours)[3]
        total += len(sizes_for(sizes, tok)) * (1 if forms == ("default",) else len(formulations))
    return total



# --------------------------------------------------------------------------- child side
def _rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB.

    On Linux the high-water mark ``VmHWM`` of /proc/self/status: it belongs to the
    process image, so it starts afresh at ``exec``, whereas ``ru_maxrss`` survives
    ``fork``+``exec`` and would report the (larger) parent's memory for a small child.
    Elsewhere ``ru_maxrss`` (KiB on Linux, bytes on macOS).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    scale = 1.0 if sys.platform == "darwin" else 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _build(space: MetricSpace, family: str, options: Mapping[str, Any], formulation: str, epsilon: float,
           time_limit: float | None, prior: np.ndarray | None = None) -> Any:
    kwargs = dict(options)
    if options.get("objective") == "expected" and prior is not None:
        kwargs["prior"] = prior
    if formulation != "default":
        kwargs["formulation"] = formulation
    if time_limit is not None:
        kwargs["time_limit"] = time_limit
    return registry.build(family, space, epsilon, **kwargs)


def _child_main(workdir: str) -> None:
    """Entry point of the child process: read the job, build once, write the result.

    The job (the pickled space and the build's arguments) and the result (JSON) are
    files in ``workdir``; the child is a fresh interpreter started by
    :func:`_run_child`, so nothing of the parent's memory counts towards its peak.
    """
    import json
    import pickle
    from pathlib import Path

    from ..loss import quantile_loss, worst_case_loss

    work = Path(workdir)
    with (work / "space.pickle").open("rb") as fh:
        space, prior = pickle.load(fh)  # our own file, written by the parent a moment ago
    job = json.loads((work / "job.json").read_text(encoding="utf-8"))
    out: dict[str, Any] = {"baseline_mib": _rss_mib()}
    try:
        t0 = time.perf_counter()
        mech = _build(space, job["family"], job["options"], job["formulation"], job["epsilon"],
                      job["time_limit"], prior)
        out["seconds"] = time.perf_counter() - t0
        lp = dict(mech.info.get("lp") or {})
        out.update(
            status="ok",
            variables=lp.get("variables"),
            constraints=lp.get("constraints"),
            nonzeros=lp.get("nonzeros"),
            rounds=lp.get("rounds"),
            lp_seconds=lp.get("solve_seconds"),
            iterations=lp.get("simplex_iterations"),
            loss_max=worst_case_loss(mech.matrix, mech.distances),
            loss_quantile=quantile_loss(mech.matrix, mech.distances, 0.95),
            epsilon_audit=float(mech.info.get("epsilon_audit", mech.audit().epsilon)),
        )
        if job["options"].get("objective") == "expected":
            pi = np.full(space.n, 1.0 / space.n) if prior is None else np.asarray(prior, dtype=float)
            out["objective"] = float(pi @ (mech.matrix * mech.distances).sum(axis=1))
        else:
            out["objective"] = out["loss_max"]
        if job.get("certify") and job["family"] == "optimal":
            out["peak_mib"] = _rss_mib()  # the build's peak, before the certificate's own LP
            out.update(_certify(mech, job, prior, out["objective"]))
    except SolverError as ex:
        timed_out = isinstance(ex, SolverTimeLimitError)
        out.update(status="time-out" if timed_out else "solver-error", message=" ".join(str(ex).split()))
    except Exception as ex:  # reported in the table, never hidden
        out.update(status="error", message=f"{type(ex).__name__}: {' '.join(str(ex).split())}",
                   traceback=traceback.format_exc(limit=5))
    out.setdefault("peak_mib", _rss_mib())
    (work / "result.json").write_text(json.dumps(jsonable(out), allow_nan=False), encoding="utf-8")


def _certify(mech: Any, job: Mapping[str, Any], prior: np.ndarray | None, objective: float) -> dict[str, Any]:
    """The certified gap of an OPTMech build (:mod:`..lp.certificate`), after the timed build."""
    from ..lp.certificate import lower_bound

    expected = job["options"].get("objective") == "expected"
    pi = (np.full(mech.n, 1.0 / mech.n) if prior is None else np.asarray(prior, dtype=float)) if expected else None
    dual = (mech.info.get("lp") or {}).get("dual_bound")  # block-ipm: from the build's own duals
    if dual is not None and dual > 0 and objective - dual <= 1e-9 * dual:
        return {"certified_gap": (objective - dual) / dual, "extra": {"bound": dual, "bound_seconds": 0.0,
                                                                      "bound_status": "the build's duals"}}
    bound = lower_bound(mech.distances, job["epsilon"], mech.matrix, prior=pi, time_limit=job["certify"])
    value = bound.value if dual is None else max(bound.value, float(dual))
    gap = (objective - value) / value if value > 0 else None
    return {"certified_gap": gap, "extra": {"bound": value, "bound_seconds": bound.seconds,
                                            "bound_rows": bound.privacy_rows, "bound_status": bound.status,
                                            "dual_bound": dual}}


# --------------------------------------------------------------------------- parent side
_CHILD_CODE = "import sys; from metricdp.experiments.bench_lp import _child_main; _child_main(sys.argv[1])"


def _run_child(space: MetricSpace, family: str, options: dict[str, Any], formulation: str, epsilon: float,
               time_limit: float | None, grace: float, prior: np.ndarray | None = None,
               certify: float | None = None) -> dict[str, Any]:
    """Run one build in a fresh interpreter (``python -c``), killed after the limit."""
    import json
    import pickle
    import subprocess
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="metricdp-bench-") as tmp:
        work = Path(tmp)
        with (work / "space.pickle").open("wb") as fh:
            pickle.dump((space, prior), fh, protocol=pickle.HIGHEST_PROTOCOL)
        job = {"family": family, "options": options, "formulation": formulation, "epsilon": epsilon,
               "time_limit": time_limit, "certify": certify}
        (work / "job.json").write_text(json.dumps(job), encoding="utf-8")
        wait = None if time_limit is None else time_limit + grace + (certify or 0.0)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD_CODE, tmp], capture_output=True, text=True,
                                  timeout=wait, check=False)
        except subprocess.TimeoutExpired:  # run() has killed the child
            elapsed = time.perf_counter() - t0
            msg = f"killed after {elapsed:.0f} s (limit {time_limit:g} s + grace)"
            return {"status": "time-out", "message": msg}
        result_file = work / "result.json"
        if not result_file.is_file():
            tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
            msg = f"child process exited with code {proc.returncode} and no result"
            msg += "".join(f": {t}" for t in tail)
            return {"status": "error", "message": msg}
        return dict(json.loads(result_file.read_text(encoding="utf-8")))


#: Longest time limit a benchmark takes (seconds, about 116 days): the child's deadline adds a
#: grace to it and must stay a finite number of seconds.
_MAX_SECONDS = 1e7


def _seconds(value: float, name: str) -> float:
    """A time limit in (0, _MAX_SECONDS] seconds."""
    value = check_epsilon(value, name)
    if value > _MAX_SECONDS:
        raise ValidationError(f"{name} must be at most {_MAX_SECONDS:g} seconds, got {value:g}")
    return value


def run_bench(
    sizes: Sequence[int] | Mapping[str, Sequence[int]],
    mechanisms: Sequence[str] = ("optimal", "constopt", "spanner"),
    formulations: Sequence[str] = ("fast", "full"),
    *,
    neighbours: int = 10,
    epsilon: float = 1.0,
    epsilons: Sequence[float] | None = None,
    data: str = "glove",
    seed: int = 0,
    time_limit: float | None = 600.0,
    grace: float | None = None,
    full_max_n: int | None = None,
    full_time_limit: float | None = None,
    space_factory: Callable[[int], MetricSpace | tuple[MetricSpace, np.ndarray | None]] | None = None,
    on_start: Callable[[int, str, str, float], None] | None = None,
    on_row: Callable[[BenchRow], None] | None = None,
    certify: float | None = None,
) -> list[BenchRow]:
    """Run the benchmark; one :class:`BenchRow` per (n, eps, mechanism, formulation).

    Parameters
    ----------
    sizes : list of int, or mapping mechanism token -> list of int
        The sizes n; a mapping gives each mechanism its own sizes (tokens as in
        ``mechanisms``; a token missing from the mapping uses the ``"*"`` entry).
    mechanisms : list of str
        ``NAME[@R]`` tokens (see the module docstring).
    formulations : list of str
        Subset of ``fast``, ``full``; SpannerMech has only ``default``.
    neighbours : int
        ConstOPTMech's r unless a token says ``@R``.
    epsilon : float
        Nominal eps of every build (unless ``epsilons``).
    epsilons : list of float, optional
        The eps sweep: every size is built at each of them (a time-out stops the series
        of its mechanism/formulation at that eps only).
    data, seed : str, int
        The space and prior (see :func:`bench_data`), the same for every build of a size.
    time_limit : float or None
        Seconds per build (passed to HiGHS per LP; the child is killed after
        ``time_limit + grace``).
    grace : float, optional
        Extra seconds before the kill (default ``max(30, time_limit)``: builders that
        solve several LPs, each under the limit, still get stopped).
    full_max_n : int, optional
        Run the reference formulation only up to this n (larger: reported as skipped),
        so that one run can cover sizes where the full LP cannot finish.
    full_time_limit : float, optional
        Seconds per build of the reference formulation (default ``time_limit``): the
        reference is needed only where it finishes, and its time-out stops its series.
    space_factory : callable, optional
        ``n -> MetricSpace`` or ``n -> (MetricSpace, prior)`` replacing :func:`bench_data`.
    on_start, on_row : callable, optional
        Progress hooks: ``on_start(n, mechanism, formulation, eps)`` before a build and
        ``on_row(row)`` as soon as it is finished (checkpoint it there: :func:`append_checkpoint`).
    certify : float, optional
        Seconds for a certified lower bound on the LP optimum after each OPTMech build
        (:mod:`metricdp.lp.certificate`, not timed with the build): ``certified_gap`` =
        (objective - bound) / bound, an upper bound on the distance to the exact optimum.
    """
    eps_list = [check_epsilon(e) for e in ([epsilon] if epsilons is None else epsilons)]
    if not eps_list:
        raise ValidationError("no epsilon to benchmark")
    if data not in DATASETS:
        raise ValidationError(f"data must be one of {', '.join(DATASETS)}, got {data!r}")
    if time_limit is not None:
        time_limit = _seconds(time_limit, "time_limit")
    full_limit = time_limit if full_time_limit is None else _seconds(full_time_limit, "full_time_limit")
    if certify is not None:
        certify = _seconds(certify, "certify")

    def grace_for(limit: float | None) -> float:
        return max(30.0, limit or 0.0) if grace is None else float(grace)

    bad = [f for f in formulations if f not in FORMULATIONS]
    if bad or not formulations:
        raise ValidationError(
            f"formulations must be among {', '.join(FORMULATIONS)}, got {list(formulations)!r}"
        )
    plans = [(tok, *parse_mechanism(tok, neighbours)) for tok in mechanisms]
    if not plans:
        raise ValidationError("no mechanism to benchmark")

    def sizes_of(token: str) -> list[int]:
        return sizes_for(sizes, token)

    all_sizes = sorted({n for tok, *_ in plans for n in sizes_of(tok)})
    if not all_sizes:
        raise ValidationError("no size to benchmark")
    factory = space_factory or (lambda n: bench_data(n, data, seed))
    stopped: dict[tuple[str, str, float], int] = {}
    rows: list[BenchRow] = []
    for n in all_sizes:
        loaded: tuple[MetricSpace, np.ndarray | None] | None = None
        for eps, (tok, label, family, options, forms) in ((e, p) for e in eps_list for p in plans):
            if n not in sizes_of(tok):
                continue
            use = [f for f in forms if f in formulations] if forms != ("default",) else ["default"]
            for form in sorted(use, key=lambda f: f != "full"):  # the reference first: gaps at once
                row = BenchRow(n, label, form, epsilon=eps, data=data if space_factory is None else "custom")
                if (label, form, eps) in stopped:
                    row.status = "skipped"
                    row.message = f"series timed out at n = {stopped[label, form, eps]}"
                elif form == "full" and full_max_n is not None and n > full_max_n:
                    row.status = "skipped"
                    row.message = f"full formulation run only up to n = {full_max_n}"
                else:
                    if loaded is None:
                        made = factory(n)
                        loaded = made if isinstance(made, tuple) else (made, None)
                    if on_start is not None:
                        on_start(n, label, form, eps)
                    limit = full_limit if form == "full" else time_limit
                    res = _run_child(loaded[0], family, options, form, eps, limit, grace_for(limit), loaded[1],
                                     certify)
                    for key, value in res.items():
                        if key == "extra":
                            row.extra.update(value)
                        elif hasattr(row, key) and key not in ("n", "mechanism", "formulation", "epsilon"):
                            setattr(row, key, value)
                    if "traceback" in res:
                        row.extra["traceback"] = res["traceback"]
                    if row.status == "time-out":
                        stopped[label, form, eps] = n
                    if form == "fast":  # the reference ran before: the gap is known now
                        _compare([r for r in rows if (r.n, r.epsilon, r.mechanism) == (n, eps, label)] + [row])
                rows.append(row)
                if on_row is not None:
                    on_row(row)
    _compare(rows)
    return rows


def _compare(rows: list[BenchRow]) -> None:
    """Fill ``vs_full`` and ``gap`` of the fast and block-ipm rows: speed-up, relative
    objective difference against the full LP's row."""
    full = {(r.n, r.epsilon, r.mechanism): r for r in rows if r.formulation == "full"}
    for r in rows:
        ref = full.get((r.n, r.epsilon, r.mechanism))
        if r.formulation == "full" or ref is None:
            continue
        if r.status == "ok" and ref.status == "ok" and r.seconds and ref.seconds and r.objective is not None \
                and ref.objective is not None:
            rel = (r.objective - ref.objective) / ref.objective if ref.objective else 0.0
            r.gap = rel
            r.vs_full = f"{ref.seconds / r.seconds:.1f}x faster, objective {rel:+.1e}"
        elif r.status == "ok" and ref.status == "time-out":
            r.vs_full = "full timed out"
        elif r.status == "ok" and ref.status == "skipped":
            r.vs_full = f"full skipped ({ref.message})" if ref.message else "full skipped"
