r"""Figure 2 of Alvim et al. (CSF 2018): estimating a location distribution under local mDP.

Setting ([1]_ Section VI): a 4.5 km square of Paris cut into a 30 x 30 grid of 150 m
cells (Euclidean metric in metres, epsilon per metre); 750 check-ins; each user reports
her cell through a mechanism and the collector estimates the distribution of the cells
with the Iterative Bayesian Update (:func:`metricdp.estimation.ibu`). The mechanisms are
compared at equal expected distance between the true and the reported cell,
:math:`E_d = 450` m under the check-ins' distribution
(:func:`metricdp.estimation.calibrate_expected_distance`):

* k-RR (flat, standard LDP; calibrated in its LDP parameter),
* the geometric mechanism on the grid (exact truncated-lattice form),
* the discretised planar Laplace mechanism.

For each dataset size N = 10, 20, ..., 750 and each repetition, N of the check-ins are
drawn without replacement, privatized, estimated by IBU, and the estimate is compared
with the empirical distribution of those N check-ins by the Earth mover's distance
(metres). The EMD is averaged over the repetitions.

Data
----
Gowalla's check-ins are not shipped. Unless a check-in file is given, the stand-in is
built from real data (:func:`standin_prior`): GeoNames' populated places
(:func:`metricdp.data.geo.populated_places`) in and near the square, each attracting
check-ins in proportion to its population, spread as a Gaussian of 300 m around it and
integrated exactly over the cells; 750 check-ins are then drawn from that distribution. With a check-in file
(``user,time,lat,lon``, :func:`metricdp.data.checkins.read_checkins`) the check-ins in
the square are binned into the cells and 750 of them drawn at random (all of them when
fewer). docs/experiments.md discusses the choice and compares with the paper.

References
----------
.. [1] M. S. Alvim, K. Chatzikokolakis, C. Palamidessi, A. Pazii. "Local differential
   privacy on metric spaces: optimizing the trade-off with utility". CSF 2018,
   Section VI and Figure 2.
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from .._progress import Progress
from .._validation import check_int
from ..errors import ValidationError
from ..estimation import emd, ibu
from ..io import atomic_write
from ..mechanisms.distance_calibration import Calibrated, calibrate_expected_distance
from ..spaces import EARTH_RADIUS_KM, MetricSpace

__all__ = [
    "FULL",
    "MECHANISMS",
    "PAPER_EPSILON",
    "PARIS_CENTRE",
    "QUICK",
    "LDPConfig",
    "LDPResult",
    "bin_checkins",
    "run_ldp",
    "standin_prior",
]

#: Centre of the square (Paris, Hôtel de Ville), (lat, lon) in degrees.
PARIS_CENTRE = (48.8566, 2.3522)
#: Spread of the check-ins around a place (metres): two cells of the paper's grid.
PLACE_SIGMA_M = 300.0
#: Paris's density (people per km^2; about 2.1 million people on 105 km^2). A place
#: listed with more people than the square holds at this density (the city of Paris
#: itself) aggregates places listed separately, and is left out.
PARIS_DENSITY_KM2 = 20_000.0
#: Places up to this far outside the square still spill into it (metres).
PLACES_MARGIN_M = 2_000.0

#: The mechanisms compared: key -> (family name for the calibration, legend label).
MECHANISMS: dict[str, tuple[str, str]] = {
    "krr": ("krr", "k-RR"),
    "geometric": ("geometric", "geometric"),
    "planar-laplace": ("planar-laplace", "planar Laplace"),
}
#: The paper's calibrated parameters for Paris ([1]_ Section VI): k-RR's LDP epsilon,
#: and epsilon per metre for the two mDP mechanisms.
PAPER_EPSILON: dict[str, float] = {"krr": 8.248, "geometric": 0.00398, "planar-laplace": 0.00404}



@dataclass(frozen=True)
class LDPConfig:
    """Parameters of one run (see :data:`FULL` and :data:`QUICK`).

    Attributes
    ----------
    rows, cols, cell : int, int, float
        The grid: ``rows x cols`` square cells of ``cell`` metres.
    checkins : int
        Size of the full dataset.
    target : float
        Expected distance E_d (metres) every mechanism is calibrated to.
    sizes : tuple of int
        Dataset sizes N.
    repetitions : int
        Privatizations averaged per size.
    calibration_tol : float
        Relative tolerance on E_d.
    ibu_tol, ibu_max_iter : float, int
        IBU's stopping rule (L1 change) and iteration cap.
    """

    rows: int = 30
    cols: int = 30
    cell: float = 150.0
    checkins: int = 750
    target: float = 450.0
    sizes: tuple[int, ...] = tuple(range(10, 751, 10))
    repetitions: int = 10
    calibration_tol: float = 1e-6
    # L1 change 1e-5: stopping at 1e-6 instead moves the EMD by a fraction of a per cent
    # at several times the cost (benchmarks/RESULTS.md#docstrings-experiments-ldp-ibu-tol).
    ibu_tol: float = 1e-5
    ibu_max_iter: int = 20_000


#: The paper's setting: 30 x 30 cells of 150 m, N = 10, 20, ..., 750.
FULL = LDPConfig()
#: A CI-sized run over the same 4.5 km square: 15 x 15 cells of 300 m, 8 sizes,
#: 2 repetitions, looser tolerances.
QUICK = LDPConfig(
    rows=15,
    cols=15,
    cell=300.0,
    sizes=(10, 50, 100, 200, 300, 450, 600, 750),
    repetitions=2,
    calibration_tol=1e-4,
    ibu_tol=1e-5,
    ibu_max_iter=5_000,
)


@dataclass(frozen=True)
class LDPResult:
    """Outcome of :func:`run_ldp`.

    ``emd_mean[key]`` and ``emd_stderr[key]`` have one entry per size in
    ``config.sizes``; ``calibration[key]`` holds the calibrated mechanism.
    """

    config: LDPConfig
    seed: int
    source: str
    data: NDArray[np.intp]
    calibration: dict[str, Calibrated]
    emd_mean: dict[str, NDArray[np.float64]]
    emd_stderr: dict[str, NDArray[np.float64]]
    ibu_unconverged: dict[str, int]
    seconds: float
    files: dict[str, Path] = field(default_factory=dict)


# --------------------------------------------------------------------------- data
def _local_metres(lat: NDArray, lon: NDArray, centre: tuple[float, float]) -> tuple[NDArray, NDArray]:
    """Equirectangular projection around ``centre`` in metres (x east, y north).

    Over the few kilometres of the square the scale error is below 1e-5 relative.
    """
    lat0, lon0 = centre
    k = EARTH_RADIUS_KM * 1000.0 * math.pi / 180.0
    return (np.asarray(lon) - lon0) * k * math.cos(math.radians(lat0)), (np.asarray(lat) - lat0) * k


def _square(config: LDPConfig) -> tuple[float, float]:
    """Half-widths (x, y) of the grid's rectangle in metres, centred on the centre."""
    return config.cols * config.cell / 2, config.rows * config.cell / 2


def standin_prior(
    config: LDPConfig = FULL, centre: tuple[float, float] = PARIS_CENTRE
) -> tuple[NDArray[np.float64], int]:
    r"""The stand-in check-in distribution over the cells, and the number of places used.

    Each populated place i (GeoNames cities500, population :math:`P_i`, unknown counted
    as 500) within :data:`PLACES_MARGIN_M` of the square attracts check-ins in
    proportion to :math:`P_i`, spread around it as an isotropic Gaussian of
    :math:`\sigma` = :data:`PLACE_SIGMA_M`. Places with more people than the square
    holds at :data:`PARIS_DENSITY_KM2` are aggregates of places listed separately (the
    city of Paris beside its arrondissements) and are left out. The mass of cell (r, c),
    with edges :math:`x_c, y_r` in metres around the centre, is exact:

    .. math::

        w_{rc} = \sum_i P_i\,
            [\Phi(\tfrac{x_{c+1} - x_i}{\sigma}) - \Phi(\tfrac{x_c - x_i}{\sigma})]
            [\Phi(\tfrac{y_{r+1} - y_i}{\sigma}) - \Phi(\tfrac{y_r - y_i}{\sigma})],

    normalised over the grid. Cell (r, c) is point ``r * cols + c`` of
    ``MetricSpace.grid(rows, cols, cell)``; rows go south to north, columns west to east.
    """
    from ..data.geo import MISSING_POPULATION, populated_places

    hx, hy = _square(config)
    k = EARTH_RADIUS_KM * 1000.0 * math.pi / 180.0
    lat0, lon0 = centre
    dlat = (hy + PLACES_MARGIN_M) / k
    dlon = (hx + PLACES_MARGIN_M) / (k * math.cos(math.radians(lat0)))
    places = populated_places(lat0 - dlat, lon0 - dlon, lat0 + dlat, lon0 + dlon)
    pop = np.where(places.population > 0, places.population, MISSING_POPULATION).astype(np.float64)
    keep = pop <= PARIS_DENSITY_KM2 * (4 * hx * hy) * 1e-6
    if not keep.any():
        raise ValidationError(f"no populated places near {centre}: give a check-in file instead")
    x, y = _local_metres(places.lat[keep], places.lon[keep], centre)
    xe = -hx + config.cell * np.arange(config.cols + 1)
    ye = -hy + config.cell * np.arange(config.rows + 1)
    mass_x = np.diff(ndtr((xe[None, :] - x[:, None]) / PLACE_SIGMA_M), axis=1)  # (places, cols)
    mass_y = np.diff(ndtr((ye[None, :] - y[:, None]) / PLACE_SIGMA_M), axis=1)  # (places, rows)
    w = np.einsum("i,ir,ic->rc", pop[keep], mass_y, mass_x).ravel()
    if not w.sum() > 0:
        raise ValidationError(f"the populated places near {centre} put no mass on the grid")
    return w / w.sum(), int(keep.sum())


def bin_checkins(
    lat: NDArray, lon: NDArray, config: LDPConfig = FULL, centre: tuple[float, float] = PARIS_CENTRE
) -> NDArray[np.intp]:
    """Cell index (``r * cols + c``) of every check-in inside the square; others dropped."""
    hx, hy = _square(config)
    x, y = _local_metres(np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64), centre)
    inside = (x >= -hx) & (x < hx) & (y >= -hy) & (y < hy)
    c = np.minimum(((x[inside] + hx) // config.cell).astype(np.intp), config.cols - 1)
    r = np.minimum(((y[inside] + hy) // config.cell).astype(np.intp), config.rows - 1)
    return r * config.cols + c


def _dataset(
    config: LDPConfig,
    rng: np.random.Generator,
    checkins: str | PathLike[str] | None,
    centre: tuple[float, float],
) -> tuple[NDArray[np.intp], str]:
    n = config.rows * config.cols
    if checkins is None:
        prior, places = standin_prior(config, centre)
        data = rng.choice(n, size=config.checkins, p=prior)
        source = (
            f"stand-in: {config.checkins} check-ins drawn from {places} GeoNames populated places "
            f"near ({centre[0]:.4f}, {centre[1]:.4f}), population-weighted, spread by a "
            f"{PLACE_SIGMA_M:g} m Gaussian"
        )
        return data.astype(np.intp), source
    from ..data.checkins import read_checkins

    ch = read_checkins(checkins)
    cells = bin_checkins(ch.lat, ch.lon, config, centre)
    if cells.size < 2:
        raise ValidationError(
            f"{checkins}: only {cells.size} of {len(ch.lat)} check-ins fall in the "
            f"{2 * _square(config)[0] / 1000:g} km square around ({centre[0]}, {centre[1]}); "
            "choose the square's centre (the parameter 'centre': LAT, LON)"
        )
    take = min(config.checkins, cells.size)
    data = cells[rng.permutation(cells.size)[:take]]
    where = f"{take} of the {cells.size} check-ins in the square ({len(ch.lat)} read)"
    return data, f"{Path(checkins).name}: {where}"


# --------------------------------------------------------------------------- run
def run_ldp(
    out: str | PathLike[str] | None = None,
    *,
    quick: bool = False,
    seed: int = 0,
    checkins: str | PathLike[str] | None = None,
    repetitions: int | None = None,
    centre: tuple[float, float] = PARIS_CENTRE,
    config: LDPConfig | None = None,
    progress: Progress | None = None,
) -> LDPResult:
    """Run the experiment and (when ``out`` is given) write its files there.

    Parameters
    ----------
    out : path-like, optional
        Directory for ``ldp.csv`` (EMD per mechanism and size), ``ldp.png`` (the plot)
        and ``ldp.md`` (summary); created when missing.
    quick : bool
        Use :data:`QUICK` instead of :data:`FULL`.
    seed : int
        Seeds the data, the subsets and the privatization noise (an experiment, not a
        release: reproducibility is the point).
    checkins : path-like, optional
        A check-in file used instead of the stand-in data.
    repetitions : int, optional
        Overrides the configuration's repetitions.
    centre : (lat, lon)
        Centre of the square.
    config : LDPConfig, optional
        Overrides ``quick`` entirely.
    progress : callable, optional
        ``progress(done, total, description)`` (:data:`metricdp._progress.Progress`).

    Returns
    -------
    LDPResult
    """
    started = time.perf_counter()
    cfg = config if config is not None else (QUICK if quick else FULL)
    if repetitions is not None:
        cfg = replace(cfg, repetitions=check_int(repetitions, "repetitions", minimum=1))
    seed = check_int(seed, "seed", minimum=0)
    out_dir = None if out is None else Path(out)
    if out_dir is not None:
        if out_dir.exists() and not out_dir.is_dir():
            raise ValidationError(f"{out_dir} exists and is not a directory")
        out_dir.mkdir(parents=True, exist_ok=True)
    # Independent streams for the data, the subsets and each mechanism's noise.
    streams = np.random.SeedSequence(seed).spawn(2 + len(MECHANISMS))
    data_rng, subset_rng = np.random.default_rng(streams[0]), np.random.default_rng(streams[1])
    data, source = _dataset(cfg, data_rng, checkins, centre)
    sizes = np.array([s for s in cfg.sizes if s <= data.size], dtype=np.intp)
    if sizes.size == 0:
        raise ValidationError(
            f"the dataset has {data.size} check-ins, fewer than the smallest size {min(cfg.sizes)}"
        )
    space = MetricSpace.grid(cfg.rows, cfg.cols, cfg.cell)
    n = space.n
    prior = np.bincount(data, minlength=n) / data.size

    # Every (size, repetition) gets its own subset of the check-ins; the same subsets
    # serve every mechanism, so the comparison is paired.
    subsets = [subset_rng.permutation(data.size)[:s] for s in sizes for _ in range(cfg.repetitions)]
    truth = np.stack([np.bincount(data[idx], minlength=n) / idx.size for idx in subsets])
    batch = len(subsets)
    total = len(MECHANISMS) * (2 + batch)
    done = 0

    def tick(what: str, units: int = 1) -> None:
        nonlocal done
        done += units
        if progress is not None:
            progress(done, total, what)

    calibration: dict[str, Calibrated] = {}
    emd_mean: dict[str, NDArray[np.float64]] = {}
    emd_stderr: dict[str, NDArray[np.float64]] = {}
    unconverged: dict[str, int] = {}
    for (key, (family, label)), stream in zip(MECHANISMS.items(), streams[2:], strict=True):
        if progress is not None:
            progress(done, total, f"calibrating {label} to E_d = {cfg.target:g} m")
        cal = calibrate_expected_distance(family, space, prior, cfg.target, tol=cfg.calibration_tol)
        calibration[key] = cal
        tick(f"privatizing and estimating ({label})")
        rng = np.random.default_rng(stream)
        inputs = data[np.concatenate(subsets)]
        reports = cal.mechanism.sample(inputs, rng)
        row = np.repeat(np.arange(batch), [idx.size for idx in subsets])
        counts = np.bincount(row * n + reports, minlength=batch * n).reshape(batch, n).astype(np.float64)
        est = ibu(counts, cal.mechanism.matrix, tol=cfg.ibu_tol, max_iter=cfg.ibu_max_iter)
        unconverged[key] = int(np.count_nonzero(~np.asarray(est.converged)))
        tick(f"earth mover's distances ({label})")
        values = np.empty(batch)
        for b in range(batch):
            values[b] = emd(est.estimate[b], truth[b], space.distances)
            tick(f"earth mover's distances ({label})")
        per_size = values.reshape(sizes.size, cfg.repetitions)
        emd_mean[key] = per_size.mean(axis=1)
        emd_stderr[key] = (
            per_size.std(axis=1, ddof=1) / math.sqrt(cfg.repetitions)
            if cfg.repetitions > 1
            else np.full(sizes.size, np.nan)
        )
    if sizes.size != len(cfg.sizes):
        cfg = replace(cfg, sizes=tuple(int(s) for s in sizes))
    result = LDPResult(
        cfg, seed, source, data, calibration, emd_mean, emd_stderr, unconverged, time.perf_counter() - started
    )
    if out_dir is not None:
        result.files.update(write_ldp(result, out_dir))
    return result


# --------------------------------------------------------------------------- output
def write_ldp(result: LDPResult, out_dir: Path) -> dict[str, Path]:
    """Write ``ldp.csv``, ``ldp.png`` and ``ldp.md`` into ``out_dir``."""
    from ._plot import line_plot

    cfg = result.config
    files = {"csv": out_dir / "ldp.csv", "png": out_dir / "ldp.png", "md": out_dir / "ldp.md"}
    with atomic_write(files["csv"], "w") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["mechanism", "epsilon", "checkins", "emd_mean_m", "emd_stderr_m", "repetitions"])
        for key in MECHANISMS:
            for size, mean, se in zip(cfg.sizes, result.emd_mean[key], result.emd_stderr[key], strict=True):
                w.writerow([key, repr(result.calibration[key].epsilon), size, f"{mean:.6f}", f"{se:.6f}",
                            cfg.repetitions])
    series = {
        f"{label} (eps = {_eps_text(key, result.calibration[key].epsilon)})": (
            result.emd_mean[key],
            None if cfg.repetitions < 2 else result.emd_stderr[key],
        )
        for key, (_, label) in MECHANISMS.items()
    }
    line_plot(
        files["png"],
        cfg.sizes,
        series,
        xlabel="number of check-ins",
        ylabel="EMD of the IBU estimate (m)",
        title=f"{cfg.rows}x{cfg.cols} cells of {cfg.cell:g} m, E_d = {cfg.target:g} m, "
        f"{cfg.repetitions} repetitions",
    )
    with atomic_write(files["md"], "w") as fh:
        fh.write(summary_markdown(result))
    return files


def _eps_text(key: str, eps: float) -> str:
    return f"{eps:.4g}" if key == "krr" else f"{eps:.4g}/m"


def summary_markdown(result: LDPResult) -> str:
    """A short markdown report: setting, calibration next to the paper, EMD at a few sizes."""
    cfg = result.config
    lines = [
        "# LDP experiment (Alvim et al., CSF 2018, Figure 2)",
        "",
        f"- grid: {cfg.rows} x {cfg.cols} cells of {cfg.cell:g} m; target E_d = {cfg.target:g} m",
        f"- data: {result.source}",
        f"- sizes: {cfg.sizes[0]} to {cfg.sizes[-1]} ({len(cfg.sizes)} sizes), "
        f"{cfg.repetitions} repetitions, seed {result.seed}",
        f"- IBU: tol {cfg.ibu_tol:g} (L1 change), cap {cfg.ibu_max_iter} iterations; runs that hit the cap: "
        + ", ".join(f"{MECHANISMS[k][1]} {v}" for k, v in result.ibu_unconverged.items()),
        f"- run time: {result.seconds:.0f} s",
        "",
        "| mechanism | epsilon (ours) | epsilon (paper, Paris) | E_d (m) | builds |",
        "|---|---|---|---|---|",
    ]
    for key, (_, label) in MECHANISMS.items():
        cal = result.calibration[key]
        unit = "" if key == "krr" else " /m"
        lines.append(
            f"| {label} | {cal.epsilon:.5g}{unit} | {PAPER_EPSILON[key]:g}{unit} | "
            f"{cal.expected_distance:.3f} | {cal.iterations} |"
        )
    picks = sorted({cfg.sizes[0], *(s for s in (50, 100, 250, 500) if s in cfg.sizes), cfg.sizes[-1]})
    lines += ["", "EMD of the IBU estimate (m), mean ± standard error:", ""]
    lines.append("| check-ins | " + " | ".join(label for _, label in MECHANISMS.values()) + " |")
    lines.append("|---" * (len(MECHANISMS) + 1) + "|")
    for s in picks:
        i = cfg.sizes.index(s)
        cells = [f"{result.emd_mean[k][i]:.1f} ± {result.emd_stderr[k][i]:.1f}" for k in MECHANISMS]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
