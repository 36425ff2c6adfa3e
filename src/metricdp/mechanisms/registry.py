"""The one registry of mechanism families.

Every family metricdp offers is one :class:`Family` entry below: its builder (imported
only when the family is built), its parameters with their declared constraints, whether
its matrix is exact (audited) or a Monte-Carlo estimate, and for an estimated family its
true sampler and the proven epsilon of that sampler as a function of its parameters. The
CLI ``build`` command, calibration, the experiments, the benchmark and the mechanism-file
loader all read this table; adding a family is one module plus one entry here.

>>> from metricdp.mechanisms import names, build
>>> "exponential" in names()
True
>>> from metricdp.spaces import MetricSpace
>>> space = MetricSpace.from_points([[0.0], [1.0], [3.0]])
>>> build("exponential", space, 1.0).audit().epsilon <= 1.0
True
>>> build("exponential", space, 1.0, calibrat=True)
Traceback (most recent call last):
...
metricdp.errors.ValidationError: exponential takes no parameter 'calibrat'; it takes: calibrate

A builder takes ``(space, epsilon, **params)`` and returns a
:class:`~metricdp.mechanisms.base.Mechanism`. Its parameters are validated from their
declarations only (as scikit-learn's ``_param_validation`` derives its checks from
declared constraints): :meth:`Family.build` checks every parameter against its
:class:`Param` before calling the builder, and a builder called directly is wrapped by
:func:`declared`, which applies the same checks to the arguments given. One invalid value
gives one :class:`~metricdp.errors.ValidationError` naming the family, the parameter, the
allowed values and the value received, whatever the family; builders restate none of these
constraints (they check only what depends on the space: shapes, n, the metric).

The command line reads the same declarations: ``metricdp build`` has one option per
declared ``flag`` (type, range, default and help from the :class:`Param`), ``metricdp
text`` one per flag of the matrix-free families (:data:`SAMPLER_FAMILIES`), and the CLI
names the flag of a parameter through :func:`flag_of` when it reports an error.

This module is the table and its lookups; the parameter type and its validation live in
:mod:`._params` and the option derivation in :mod:`._options`, and every public name of
either is imported from here (``metricdp.mechanisms.registry.Param``).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from .._resources import check_allocation
from .._validation import check_epsilon
from ..errors import ValidationError
from ._options import Option, flag_of, options
from ._params import Param

if TYPE_CHECKING:  # pragma: no cover
    from ..outputs import OutputSet
    from ..pointspace import PointSpace
    from ..spaces import MetricSpace
    from ..text.base import TextMechanism
    from .base import Mechanism, TrueSampler

__all__ = [
    "FAMILIES", "SAMPLER_FAMILIES", "Family", "Option", "Param", "SamplerFamily", "build", "declared", "flag_of",
    "get", "get_sampler", "names", "options", "sampler_names", "supports_outputs",
]


F = TypeVar("F", bound=Callable[..., Any])


def declared(family: str) -> Callable[[F], F]:
    """Decorate the builder of ``family``: the arguments a caller gives are checked against its Params.

    The one validation of a builder's declared parameters, whether it is called through
    :func:`build` (which checks first and calls the undecorated function) or directly:
    ``exponential(space, 1.0, calibrate="no")`` gives the same ValidationError as
    ``build("exponential", space, 1.0, calibrate="no")``. Defaults are not re-checked:
    they equal the declared ones (tests/mechanisms/test_registry.py asserts it). The
    family is looked up at call time, so the builder's module need not import the table.
    """

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            entry = get(family)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return fn(*args, **kwargs)  # Python's own TypeError: a call the signature does not allow
            for name, value in bound.arguments.items():
                param = entry.find(name)
                if param is not None and param.kind not in ("vector", "matrix"):
                    # per-point values depend on the space: the builder checks them and names the index
                    bound.arguments[name] = param.check(value, entry.name)
            return fn(*bound.args, **bound.kwargs)

        wrapper.__family__ = family  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Family:
    """A mechanism family: how to build it, what it takes, and what its matrix is.

    ``builder`` and ``sampler`` are ``"module:function"`` paths imported on first use, so
    listing the families imports no solver. ``epsilon`` says how the family takes its
    privacy level: ``"required"`` (the second positional argument), ``"optional"`` (None:
    the builder states the audited level) or ``"or-ldp"`` (k-RR:
    exactly one of ``epsilon`` and its LDP parameter). ``calibration`` names the keyword
    that :func:`metricdp.calibration.calibrate_expected_distance` varies (None: epsilon).
    ``outputs`` says whether the builder takes a separate output set
    (``outputs=`` an :class:`~metricdp.outputs.OutputSet`: a rectangular mechanism).
    """

    name: str
    builder: str
    description: str
    params: tuple[Param, ...] = ()
    exact: bool = True
    sampler: str | None = None
    epsilon: Literal["required", "optional", "or-ldp"] = "required"
    lp: bool = False
    calibration: str | None = None
    sampler_params: tuple[str, ...] = ()
    outputs: bool = False

    def find(self, name: str) -> Param | None:
        """The declared parameter called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def param(self, name: str) -> Param:
        p = self.find(name)
        if p is not None:
            return p
        takes = ", ".join(p.name for p in self.params) or "no parameters"
        raise ValidationError(f"{self.name} takes no parameter {name!r}; it takes: {takes}")

    def check_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments for the builder (unknown names are an error)."""
        out = {name: self.param(name).check(value, self.name) for name, value in params.items()}
        for p in self.params:
            if p.required and p.name not in out:
                raise ValidationError(f"{self.name} needs the parameter {p.name!r} ({p.help})")
        return out

    def builder_function(self) -> Callable[..., Mechanism]:
        fn: Callable[..., Mechanism] = _resolve(self.builder)
        return fn

    def true_sampler(self) -> TrueSampler:
        """The sampler that draws releases of an estimated family from the mechanism itself."""
        if self.sampler is None:
            raise ValidationError(f"{self.name} is exact: its releases come from its audited matrix")
        fn: TrueSampler = _resolve(self.sampler)
        return fn

    def check_sampler_params(self, params: Mapping[str, Any]) -> None:
        """An estimated family's stored parameters, validated as its builder validates them.

        Every parameter the true sampler reads (``sampler_params``) must be present; every
        declared one that is present must pass its :class:`Param` check (a file or a caller
        cannot hand the sampler ``candidates=-3`` or ``10**12``).
        """
        missing = [k for k in self.sampler_params if k not in params]
        if missing:
            raise ValidationError(f"{self.name}: parameters lack {', '.join(map(repr, missing))}")
        for key, value in params.items():
            param = self.find(key)
            if param is not None and param.kind != "rng":
                param.check(value, self.name)

    def proven_epsilon(self, params: Mapping[str, Any]) -> float:
        """The epsilon the true sampler of an estimated family is proven to satisfy, from its params.

        For Madlib (Feyisetan et al. 2020, Theorem 1) and the subsampled exponential
        mechanism (module docstring of :mod:`metricdp.mechanisms.subsampled`) the proven
        level is the parameter ``epsilon`` itself: the noise scale (Madlib) or the exponent
        ``-epsilon d / 2`` (SSEM) is set from it.
        """
        if self.exact:
            raise ValidationError(f"{self.name} is exact: its epsilon is audited from the matrix, not derived")
        if "epsilon" not in params:
            raise ValidationError(f"{self.name}: parameters lack 'epsilon'")
        return check_epsilon(params["epsilon"], f"{self.name} parameter 'epsilon'")

    def build(
        self, space: MetricSpace, epsilon: float | None = None, *, outputs: OutputSet | None = None,
        progress: Any = None, **params: Any,
    ) -> Mechanism:
        """Build on ``space`` at ``epsilon`` with validated ``params``.

        ``outputs`` (a separate output set) is passed on to families that support one
        (``Family.outputs``); any other family refuses it with a ValidationError.

        Before building, the dense arrays of a non-LP family (the matrix, the audit's and
        the sampler's n x n temporaries: about 6 of them) are checked against the memory
        limit (:mod:`metricdp._resources`); LP families size their own models.
        """
        kwargs = self.check_params(params)
        if getattr(space, "policy", False):  # infinite distances: one build per component
            on_components = _resolve(f"{_M}.policy:build_on_components")  # mechanisms.policy
            return on_components(self, space, epsilon, kwargs, outputs=outputs, progress=progress)
        if outputs is not None:
            if not self.outputs:
                takes = ", ".join(f.name for f in FAMILIES.values() if f.outputs)
                raise ValidationError(
                    f"{self.name} has no separate output set (its outputs are the space's points); "
                    f"families that take outputs: {takes}"
                )
            kwargs["outputs"] = outputs
        n = getattr(space, "n", None)
        if isinstance(n, int) and not self.lp:
            check_allocation(6 * 8.0 * n * n, f"{self.name} on {n:,} points (6 dense {n:,} x {n:,} arrays)")
        samples = kwargs.get("samples")
        if isinstance(samples, int) and not self.exact:
            # the Monte-Carlo estimate draws at least `samples` releases per call of the sampler,
            # each with a point's coordinates and a few index arrays (madlib: noise of the space's dimension)
            points = getattr(space, "points", None)
            dim = int(np.shape(points)[1]) if points is not None and np.ndim(points) == 2 else 1
            check_allocation(8.0 * samples * (dim + 4), f"{self.name} with {samples:,} samples per row")
        fn = self.builder_function()
        fn = getattr(fn, "__wrapped__", fn) if getattr(fn, "__family__", None) == self.name else fn
        if progress is not None and "progress" in inspect.signature(fn).parameters:  # a builder that reports
            kwargs["progress"] = progress
        if self.epsilon in ("or-ldp", "optional"):
            return fn(space, epsilon=None if epsilon is None else check_epsilon(epsilon), **kwargs)
        if epsilon is None:
            raise ValidationError(f"{self.name} needs epsilon")
        return fn(space, check_epsilon(epsilon), **kwargs)


_CALIBRATE = Param("calibrate", "bool", False, "tune the inner parameter up to the exact audit", "--calibrate")
_TIME_LIMIT = Param("time_limit", "float", None, "deadline of the whole build, in seconds", "--time-limit",
                    minimum=0.0, open_minimum=True)
_SAMPLES = Param("samples", "int", 2000, "Monte-Carlo releases per row of the estimate", "--samples", minimum=2,
                 maximum=10**8)
_RNG = Param("rng", "rng", None, "randomness of the Monte-Carlo estimate (a seed: reproducible)", "--seed")

_M = "metricdp.mechanisms"

#: Family name -> entry, in the order ``names()`` lists them.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "exponential", f"{_M}.exponential:exponential",
            "Exponential mechanism, Pr ~ exp(-eps d / 2) (McSherry-Talwar 2007; Chatzikokolakis et al. 2013)",
            (_CALIBRATE,), outputs=True,
        ),
        Family(
            "weighted-exponential", f"{_M}.exponential:weighted_exponential",
            "Exponential mechanism with output weights (Imola et al., UAI 2022, Sec. 5)",
            (Param("weights", "vector", None, "one positive weight per point (CSV label,weight or .npy)",
                   "--weights", required=True), _CALIBRATE),
        ),
        Family(
            "krr", f"{_M}.krr:krr", "k-ary randomized response (Kairouz et al. 2016), eps-mDP at eps_LDP / d_min",
            (Param("ldp_epsilon", "float", None, "the LDP parameter, instead of epsilon", "--ldp-epsilon",
                   minimum=0.0, open_minimum=True),),
            epsilon="or-ldp", calibration="ldp_epsilon",
        ),
        Family(
            "geometric", f"{_M}.geometric:geometric",
            "Geometric mechanism on a lattice torus, clamped on a line, or row-normalised (Ghosh et al. 2009; "
            "Alvim et al. 2018)",
            (Param("form", "choice", "auto", "lattice torus, clamped line or row-normalised kernel", choices=(
                "auto", "lattice", "clamped", "row-normalised")),),
        ),
        Family(
            "discrete-laplace", f"{_M}.numeric:discrete_laplace",
            "Discrete Laplace (two-sided geometric) noise on an equally spaced line, outputs extended past the ends "
            "(Ghosh et al. 2009; metricdp.mechanisms.numeric)",
            (Param("tail", "float", 1e-15, "mass allowed beyond the extended outputs", minimum=0.0, maximum=0.5,
                   open_minimum=True, open_maximum=True),),
            outputs=True,
        ),
        Family(
            "planar-laplace", f"{_M}.planar_laplace:planar_laplace",
            "Planar Laplace discretised to a grid (Andres et al., CCS 2013)",
            (Param("accuracy", "float", 1e-12, "target accuracy of the cell masses", minimum=0.0,
                   maximum=1e-3, open_minimum=True, open_maximum=True),),
        ),
        Family(
            "optimal", f"{_M}.optimal:optimal",
            "OPTMech: the loss-optimal eps-mDP mechanism by LP (Imola et al., UAI 2022, LP (1))",
            (Param("objective", "choice", "worst", "loss to minimise", "--objective", choices=("worst", "expected")),
             Param("prior", "vector", None, "prior of the expected objective (CSV label,prob or .npy)", "--prior"),
             Param("loss_matrix", "matrix", None, "loss L[u, v] instead of the distances"),
             _TIME_LIMIT,
             Param("formulation", "choice", "auto",
                   "constraint generation, the full LP, interior point or decomposition",
                   choices=("auto", "fast", "full", "ipm", "block-ipm", "column-generation", "dantzig-wolfe"))),
            lp=True, outputs=True,
        ),
        Family(
            "spanner", f"{_M}.spanner:spanner",
            "SpannerMech: OPTMech's LP on the edges of a greedy spanner (Imola et al., UAI 2022, Sec. 4)",
            (Param("stretch", "float", 3.0, "stretch t of the spanner (>= 1)", "--stretch", minimum=1.0),
             _CALIBRATE, _TIME_LIMIT,
             Param("formulation", "choice", "auto", "LP formulation", choices=("auto", "fast", "ipm", "full"))),
            lp=True,
        ),
        Family(
            "constopt", f"{_M}.constopt:constopt",
            "ConstOPTMech: r free neighbours per output, the rest fixed (Imola et al., UAI 2022, Sec. 5)",
            (Param("neighbours", "int", 10, "free neighbours r per output (0: the weighted exponential fit)",
                   "--neighbours", minimum=0, aliases=("-r",)),
             Param("fit", "choice", "normalised", "how H is fitted", "--fit", choices=("normalised", "paper")),
             Param("lambdas", "floats", (0.001, 0.1, 1.0), "lambdas of the paper fit", "--lambdas", minimum=0.0),
             Param("quantile", "float", None, "minimise this quantile loss instead of the worst case",
                   "--quantile", minimum=0.0, maximum=1.0, open_minimum=True),
             _CALIBRATE, _TIME_LIMIT,
             Param("formulation", "choice", "fast", "column generation or the reference LP",
                   choices=("fast", "full")),
             Param("exponential_candidate", "bool", True, "the exponential mechanism competes with the LP "
                   "candidates unless turned off (off, with the paper fit: Algorithm 1 as the paper runs it)",
                   "--no-exponential-candidate")),
            lp=True,
        ),
        Family(
            "user-centric", f"{_M}.user_centric:user_centric",
            "Shokri's optimal strategy: the largest Bayes adversary error at expected quality loss <= Q, optionally "
            "eps-mDP (Shokri et al., CCS 2012; Shokri, PETS 2015)",
            (Param("quality", "float", None, "largest expected quality loss Q under the prior, in distance units",
                   "--quality", minimum=0.0, required=True),
             Param("prior", "vector", None, "prior of the user and the adversary (CSV label,prob or .npy)",
                   "--prior"),
             _TIME_LIMIT),
            epsilon="optional", lp=True,
        ),
        Family(
            "madlib", f"{_M}.madlib:madlib",
            "Madlib: Laplace-type noise on embeddings, nearest word (Feyisetan et al., WSDM 2020)",
            (_SAMPLES, _RNG), exact=False, sampler=f"{_M}.madlib:true_sampler", sampler_params=("epsilon",),
        ),
        Family(
            "subsampled-exponential", f"{_M}.subsampled:subsampled_exponential",
            "Subsampled exponential mechanism on m candidates (Lantz, Boyd, Page, AISec 2015)",
            (Param("candidates", "int", 10, "candidates m drawn per release", "--candidates", minimum=1,
                   maximum=1_000_000),
             Param("base", "vector", None, "data-independent base distribution (CSV or .npy)", "--base-weights"),
             _SAMPLES, _RNG),
            exact=False, sampler=f"{_M}.subsampled:true_sampler", sampler_params=("epsilon", "candidates"),
        ),
    )
}


@dataclass(frozen=True)
class SamplerFamily:
    """A matrix-free family: a sampler over a :class:`~metricdp.pointspace.PointSpace` (vectors, no n x n matrix).

    These release words of whole vocabularies (``metricdp text privatize``). Each is
    eps-mDP per token for the Euclidean distance of the embedding, with the proven
    epsilon a function of its parameters (``proven``, a ``"module:function"`` path taking
    ``epsilon`` and the family's parameters); ``exact`` says whether the family is exact
    on a finite vocabulary (its matrix can then be built and audited on a small one);
    ``disk_cache`` whether its builder keeps its per-vocabulary structures in a
    ``cache_dir`` (:mod:`metricdp.text.disk_cache`), which :meth:`build` passes on.
    """

    name: str
    builder: str
    description: str
    proven: str
    params: tuple[Param, ...] = ()
    exact: bool = True
    disk_cache: bool = False

    def find(self, name: str) -> Param | None:
        """The declared parameter called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def check_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in params.items():
            param = self.find(key)
            if param is None:
                takes = ", ".join(p.name for p in self.params) or "no parameters"
                raise ValidationError(f"text {self.name} takes no parameter {key!r}; it takes: {takes}")
            out[key] = param.check(value, f"text {self.name}")
        return out

    def proven_epsilon(self, epsilon: float, **params: Any) -> float:
        """The epsilon the sampler is proven to satisfy at these parameters."""
        value: float = _resolve(self.proven)(epsilon, **params)
        return value

    def build(self, space: PointSpace, epsilon: float, *, cache_dir: str | PathLike[str] | None = None,
              **params: Any) -> TextMechanism:
        """The sampler over ``space`` at ``epsilon`` with validated ``params``; ``cache_dir`` (an existing
        directory) keeps what a ``disk_cache`` family builds per vocabulary, and is ignored by the others."""
        extra = {"cache_dir": cache_dir} if self.disk_cache and cache_dir is not None else {}
        mechanism: TextMechanism = _resolve(self.builder)(space, check_epsilon(epsilon), **self.check_params(params),
                                                          **extra)
        return mechanism


_T = "metricdp.text"
_INDEX = Param("index", "choice", "exact", "nearest-word search: exact, or an approximate faiss index (ivf, hnsw)",
               "--index", choices=("exact", "ivf", "hnsw"))
_CACHE = Param("cache_bytes", "int", 256 * 2**20, "bytes of per-word cumulative tables kept", minimum=0)

#: Matrix-free families over a PointSpace, in the order ``sampler_names()`` lists them.
SAMPLER_FAMILIES: dict[str, SamplerFamily] = {
    f.name: f
    for f in (
        SamplerFamily("exponential", f"{_T}.exponential:ExponentialText",
                      "Exponential mechanism over a whole vocabulary, exact, blocked (McSherry-Talwar 2007)",
                      f"{_T}.exponential:exponential_epsilon", (_CACHE,)),
        SamplerFamily("tem", f"{_T}.tem:TEMText",
                      "Truncated Exponential Mechanism (Carvalho et al. 2021, Sec. 4)", f"{_T}.tem:tem_epsilon",
                      (Param("gamma", "float", None, "truncation radius (default: the paper's, from beta)", "--gamma",
                             minimum=0.0),
                       Param("beta", "float", 0.001, "the paper's beta of the default gamma", "--beta", minimum=0.0,
                             maximum=1.0, open_minimum=True, open_maximum=True),
                       _CACHE)),
        SamplerFamily("madlib", f"{_T}.madlib:MadlibText",
                      "Madlib over a whole vocabulary (Feyisetan et al., WSDM 2020)",
                      f"{_M}.madlib:madlib_epsilon", (_INDEX,), exact=False),
        SamplerFamily("mahalanobis", f"{_T}.mahalanobis:MahalanobisText",
                      "Regularised Mahalanobis mechanism (Xu et al. 2020)", f"{_T}.mahalanobis:proven_epsilon",
                      (Param("lam", "float", 0.2, "regularisation lambda", "--lam", minimum=0.0, maximum=1.0,
                             open_maximum=True), _INDEX),
                      exact=False),
        SamplerFamily("subsampled-exponential", f"{_T}.subsampled:SubsampledText",
                      "Subsampled exponential mechanism on m candidates (Lantz et al., AISec 2015)",
                      f"{_T}.subsampled:subsampled_epsilon",
                      (Param("candidates", "int", 50, "candidates m per release", "--candidates", minimum=1),
                       Param("base", "choice", None, "data-independent base: zipf (word ranks); uniform when omitted",
                             "--base", choices=("zipf",)))),
        SamplerFamily("diffractor", f"{_T}.diffractor:DiffractorText",
                      "1-Diffractor: geometric noise on positions in 1-d word lists (Meisenbacher et al. 2024); "
                      "eps-mDP for the list distance", f"{_T}.diffractor:diffractor_epsilon",
                      (Param("lists", "int", 1, "number of word lists K", "--lists", minimum=1, maximum=64),),
                      disk_cache=True),
        SamplerFamily("vickrey", f"{_T}.vickrey:VickreyText",
                      "Vickrey mechanism: Madlib's noise, then the nearest or second-nearest word (Xu et al. 2021)",
                      f"{_T}.vickrey:vickrey_epsilon",
                      (Param("threshold", "float", 0.75, "the paper's t: weight of the second-nearest word",
                             "--threshold", minimum=0.0, maximum=1.0),), exact=False),
        SamplerFamily("custext", f"{_T}.custext:CusTextText",
                      "CusText: exponential mechanism inside output sets of K near words (Chen et al. 2023); "
                      "eps-DP within a set, none across", f"{_T}.custext:custext_epsilon",
                      (Param("size", "int", 20, "words K per output set (the paper's top_k)", "--set-size",
                             minimum=1),), disk_cache=True),
    )
}


def sampler_names() -> tuple[str, ...]:
    """The matrix-free (text) family names."""
    return tuple(SAMPLER_FAMILIES)


def get_sampler(name: str) -> SamplerFamily:
    """The matrix-free family called ``name``; an unknown name lists the valid ones."""
    if not isinstance(name, str) or name not in SAMPLER_FAMILIES:
        raise ValidationError(f"unknown text mechanism {name!r}; choose one of {', '.join(SAMPLER_FAMILIES)}")
    return SAMPLER_FAMILIES[name]


def names() -> tuple[str, ...]:
    """The registered family names, as ``build`` and the CLI spell them."""
    return tuple(FAMILIES)


def get(name: str) -> Family:
    """The :class:`Family` called ``name``; an unknown name lists the valid ones."""
    if not isinstance(name, str) or name not in FAMILIES:
        raise ValidationError(f"unknown mechanism {name!r}; choose one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


def build(
    name: str, space: MetricSpace, epsilon: float | None = None, *, outputs: OutputSet | None = None, **params: Any
) -> Mechanism:
    """Build family ``name`` on ``space`` at ``epsilon`` (see :meth:`Family.build`).

    ``outputs``: a separate output set, for the families with ``Family.outputs``
    (exponential, optimal); any other family refuses it.
    """
    return get(name).build(space, epsilon, outputs=outputs, **params)


def supports_outputs(name: str) -> bool:
    """Whether mechanisms named ``name`` may have a separate output set.

    True for the families that build one (``Family.outputs``) and for names that are no
    family's (``custom`` matrices of :meth:`~metricdp.mechanisms.base.Mechanism.from_matrix`,
    remapped mechanisms ``<name>+remap``): their matrices are audited like any other.
    """
    family = FAMILIES.get(name)
    return family is None or family.outputs
