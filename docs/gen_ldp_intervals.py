"""The Hadamard-response example of docs/dataframes-and-ldp.md: its figure and its comparison table.

Run from the repository root (needs the ``plot`` extra)::

    python docs/gen_ldp_intervals.py

writes docs/img/ldp-intervals.png (a seeded draw: the same figure every run) and prints
the mean total-variation error of the estimators over 200 seeded data sets.
"""

from __future__ import annotations

import numpy as np

from metricdp._figure import new_figure, save_png
from metricdp.estimation import ibu, project_simplex
from metricdp.intervals import ibu_intervals, oracle_intervals
from metricdp.ldp import HadamardResponse

K, EPS, USERS = 8, 1.0, 20_000
TRUTH = np.array([0.25, 0.2, 0.15, 0.12, 0.1, 0.08, 0.06, 0.04])
VALUES = np.repeat(np.arange(K), np.round(TRUTH * USERS).astype(int))
ORACLE = HadamardResponse(k=K, epsilon=EPS)


def _reports(seed: int) -> tuple[np.ndarray, np.ndarray]:
    reports = ORACLE.sample(VALUES, rng=seed)
    full = np.bincount(ORACLE.report_index(reports), minlength=ORACLE.K).astype(np.float64)
    return full, ORACLE.support(reports)


def comparison(repetitions: int = 200) -> dict[str, float]:
    """Mean TV distance to the truth of each estimator, over seeded data sets."""
    errors: dict[str, list[float]] = {"unbiased": [], "unbiased, projected": [], "ibu, support channel": [],
                                      "ibu, full channel": []}
    for seed in range(repetitions):
        full, support = _reports(seed)
        estimates = {
            "unbiased": ORACLE.estimate(support, VALUES.size),
            "unbiased, projected": project_simplex(ORACLE.estimate(support, VALUES.size)),
            "ibu, support channel": ibu(support, ORACLE.channel()).estimate,
            "ibu, full channel": ibu(full, ORACLE.matrix()).estimate,
        }
        for name, est in estimates.items():
            errors[name].append(0.5 * float(np.abs(est - TRUTH).sum()))
    return {name: float(np.mean(v)) for name, v in errors.items()}


def figure(path: str = "docs/img/ldp-intervals.png") -> None:
    full, support = _reports(1000)
    boot = ibu_intervals(full, ORACLE.matrix(), draws=1000, rng=1)
    unbiased = oracle_intervals(ORACLE, support, VALUES.size, rng=1)
    fig = new_figure(7.0, 3.2)
    ax = fig.add_subplot()
    x = np.arange(K)
    for shift, est, name in ((-0.15, boot, "IBU on the full channel (bootstrap)"),
                             (0.15, unbiased, "unbiased estimate (normal)")):
        ax.errorbar(x + shift, est.point, yerr=[est.point - est.lower, est.upper - est.point], fmt="o",
                    capsize=3, label=f"{name}: TV <= {est.tv:.3f}")
    ax.scatter(x, TRUTH, marker="_", s=300, color="black", label="truth", zorder=3)
    ax.set_xlabel("category")
    ax.set_ylabel("frequency")
    ax.set_title(f"Hadamard response, k = {K}, eps = {EPS:g}, {USERS} users: 95 % intervals")
    ax.legend(fontsize=8)
    save_png(fig, path, dpi=100)
    print(f"wrote {path}")
    for name, est in (("ibu (full channel)", boot), ("unbiased", unbiased)):
        print(name, "point", est.point.round(3).tolist(), "lower", est.lower.round(3).tolist(),
              "upper", est.upper.round(3).tolist(), "tv <=", round(est.tv, 4))


if __name__ == "__main__":
    figure()
    for name, value in comparison().items():
        print(f"| {name} | {value:.5f} |")
