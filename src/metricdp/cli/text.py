"""``metricdp text privatize`` and ``metricdp text stats``: word-level mDP over a vocabulary.

``privatize`` rewrites plain text (one document per line), CSV or JSONL (``--column``),
replacing every vocabulary word by a release of a matrix-free mechanism over the
embedding (default: all 400,000 packaged GloVe 6B 50-d words) or of a mechanism file
built on a vocabulary. ``stats`` prints the plausible-deniability statistics N_w and S_w
(Feyisetan et al. 2020) as quantiles and can plot their histograms.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from ..errors import UnsafeOutputError, ValidationError
from ._common import (
    JsonOption,
    OutOption,
    SeedOption,
    check_output,
    console,
    echo_json,
    err_console,
    handle_errors,
    warn,
)

__all__ = ["load_vocabulary", "register"]

_SEED_WARNING = "--seed makes the releases reproducible by anyone who knows the seed: not private for real data"

MechOpt = Annotated[
    str,
    typer.Option(
        "--mechanism", "-m", help="exponential, tem, madlib, mahalanobis, subsampled-exponential, or a mechanism .npz."
    ),
]
EpsOpt = Annotated[
    float | None, typer.Option("--epsilon", "-e", help="Per-token mDP level (Euclidean distance of the embedding).")
]
EmbOpt = Annotated[
    str,
    typer.Option("--embeddings", help="glove (packaged GloVe 6B 50-d) or a GloVe text / .vec / word2vec .bin file."),
]
SizeOpt = Annotated[
    int | None, typer.Option("--vocabulary-size", "-n", min=2, help="Keep the N most frequent words (default: all).")
]
IndexOpt = Annotated[
    str, typer.Option("--index", help="Nearest-word search of madlib/mahalanobis: exact, ivf or hnsw (faiss).")
]
GammaOpt = Annotated[float | None, typer.Option("--gamma", help="TEM threshold (default: the paper's, beta = 0.001).")]
LamOpt = Annotated[float, typer.Option("--lam", help="Mahalanobis lambda in [0, 1).")]
CandOpt = Annotated[int, typer.Option("--candidates", min=1, help="Subsampled exponential: candidates per token.")]


def load_vocabulary(embeddings: str, size: int | None) -> Any:
    """A :class:`~metricdp.pointspace.PointSpace` of the packaged GloVe or an embeddings file."""
    from ..pointspace import PointSpace

    if embeddings == "glove":
        from ..data.glove import load_glove

        return PointSpace.from_embeddings(load_glove(), size)
    from ..data.embeddings import read_vec, read_word2vec_binary

    path = Path(embeddings)
    if not path.is_file():
        raise ValidationError(f"--embeddings {embeddings!r}: not 'glove' and no such file")
    reader = read_word2vec_binary if path.suffix.lower() == ".bin" else read_vec
    return PointSpace.from_embeddings(reader(path, limit=size))


def _params(name: str, index: str, gamma: float | None, lam: float, candidates: int) -> dict[str, Any]:
    if name in ("madlib", "mahalanobis"):
        return {"index": index, **({"lam": lam} if name == "mahalanobis" else {})}
    if name == "tem":
        return {} if gamma is None else {"gamma": gamma}
    if name == "subsampled-exponential":
        return {"candidates": candidates, "base": "zipf"}
    return {}


def _require(mechanism: str, embeddings: str, index: str) -> None:
    """Fail before any work when an option needs an extra that is not installed."""
    from .._optional import require

    if mechanism.lower().endswith(".npz"):
        return
    if embeddings == "glove":
        require("glove", what="--embeddings glove (the default)")
    if index in ("ivf", "hnsw") and mechanism in ("madlib", "mahalanobis"):
        require("faiss-cpu", what=f"--index {index}")


def _build(mechanism: str, epsilon: float | None, embeddings: str, size: int | None, params: dict[str, Any]) -> Any:
    """(sample function, vocabulary labels, point space or None, description, epsilon)."""
    from ..text.build import build, names

    if mechanism.lower().endswith(".npz"):
        from ..mechanisms.file import load_mechanism

        loaded = load_mechanism(mechanism)
        if epsilon is not None and not np.isclose(epsilon, loaded.epsilon, rtol=1e-12):
            raise ValidationError(f"--epsilon {epsilon} differs from the mechanism file's epsilon {loaded.epsilon}")
        return loaded.sample, loaded.labels, None, f"{loaded.name} from {mechanism}", float(loaded.epsilon)
    if mechanism not in names():
        raise ValidationError(f"--mechanism {mechanism!r}: choose one of {', '.join(names())} or a mechanism .npz file")
    if epsilon is None:
        raise ValidationError("--epsilon is required with a named mechanism")
    space = load_vocabulary(embeddings, size)
    mech = build(mechanism, space, epsilon, **params)
    return mech.sample, space.labels, space, repr(mech), mech.epsilon


class _Ticker:
    """Progress lines with tokens/s on stderr (every 2 s in a terminal, 10 s in a pipe)."""

    def __init__(self) -> None:
        self.every = 2.0 if err_console.is_terminal else 10.0
        self.last = time.monotonic()

    def __call__(self, done: int, total: int | None, message: str) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            err_console.print(f"privatize: {message}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``text`` sub-app (``privatize``, ``stats``) to ``app``."""
    text_app = typer.Typer(
        name="text", help="Word-level mDP for texts over a large embedding vocabulary.", no_args_is_help=True
    )

    @text_app.command("privatize")
    @handle_errors
    def privatize(
        input_file: Annotated[
            Path, typer.Argument(metavar="INPUT", help="Plain text (one document per line), .csv or .jsonl.")
        ],
        out: OutOption,
        mechanism: MechOpt,
        epsilon: EpsOpt = None,
        embeddings: EmbOpt = "glove",
        vocabulary_size: SizeOpt = None,
        column: Annotated[
            str | None, typer.Option("--column", "-c", help="Field holding the text (CSV/JSONL).")
        ] = None,
        keep: Annotated[
            Path | None, typer.Option("--keep", help="File of tokens never replaced, one per line.")
        ] = None,
        seed: SeedOption = None,
        index: IndexOpt = "exact",
        gamma: GammaOpt = None,
        lam: LamOpt = 0.2,
        candidates: CandOpt = 50,
        json_out: JsonOption = False,
    ) -> None:
        """Replace every vocabulary word of INPUT by a release of the mechanism (case pattern kept)."""
        from ..io import atomic_write
        from ..text.rewrite import Vocabulary, detect_format, rewrite_file

        check_output(out)
        _require(mechanism, embeddings, index)
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        for other in (input_file, keep, Path(mechanism)):
            if other is not None and other.exists() and out.resolve() == other.resolve():
                raise UnsafeOutputError(f"--out {out} is also an input ({other}); refusing to overwrite it")
        detect_format(input_file, column)
        kept: frozenset[str] = frozenset()
        if keep is not None:
            if not keep.is_file():
                raise ValidationError(f"--keep {keep}: no such file")
            try:
                kept = frozenset(w.strip().lower() for w in keep.read_text(encoding="utf-8").splitlines() if w.strip())
            except UnicodeDecodeError as ex:
                raise ValidationError(f"--keep {keep}: invalid UTF-8 at byte offset {ex.start}") from None
        sample, labels, _, desc, eps = _build(
            mechanism, epsilon, embeddings, vocabulary_size, _params(mechanism, index, gamma, lam, candidates)
        )
        if seed is not None:
            warn(_SEED_WARNING)
            generator = np.random.default_rng(seed)

            def draw(idx: np.ndarray) -> np.ndarray:
                return sample(idx, rng=generator)
        else:

            def draw(idx: np.ndarray) -> np.ndarray:
                return sample(idx)

        with atomic_write(out, "w") as fh:
            st = rewrite_file(input_file, fh, Vocabulary(labels), draw, column=column, keep=kept, progress=_Ticker())
        top = sorted(st.oov_examples.items(), key=lambda kv: -kv[1])[:5]
        summary = {
            "output": str(out),
            "mechanism": desc,
            "epsilon_per_token": eps,
            "vocabulary": len(labels),
            "documents": st.documents,
            "word_tokens": st.tokens,
            "replaced": st.replaced,
            "changed": st.changed,
            "kept": st.kept,
            "out_of_vocabulary": st.oov,
            "top_out_of_vocabulary": dict(top),
            "seconds": round(st.seconds, 3),
            "tokens_per_second": round(st.tokens_per_second, 1) if st.seconds else None,
            "seeded": seed is not None,
        }
        if json_out:
            echo_json(summary)
            return
        console.print(
            f"wrote {out}: {st.documents:,} documents, {st.tokens:,} word tokens: {st.replaced:,} released "
            f"({st.changed:,} changed), {st.kept:,} kept (--keep), {st.oov:,} out of vocabulary"
            f"{' (most frequent: ' + ', '.join(w for w, _ in top) + ')' if top else ''}; "
            f"{desc}, epsilon={eps:.6g} per token; {st.tokens_per_second:,.0f} tokens/s"
            f"{' [seeded]' if seed is not None else ''}",
            markup=False,
            highlight=False,
        )

    @text_app.command("stats")
    @handle_errors
    def stats(
        mechanism: MechOpt,
        epsilon: EpsOpt = None,
        embeddings: EmbOpt = "glove",
        vocabulary_size: SizeOpt = None,
        words: Annotated[int, typer.Option("--words", min=1, help="Number of words measured.")] = 200,
        top: Annotated[int, typer.Option("--from-top", min=1, help="Words drawn among the T most frequent.")] = 20_000,
        draws: Annotated[int, typer.Option("--draws", "-k", min=1, help="Releases per word (k of S_w).")] = 100,
        plot: Annotated[Path | None, typer.Option("--plot", help="Write histograms of N_w and S_w (PNG).")] = None,
        seed: SeedOption = None,
        index: IndexOpt = "exact",
        gamma: GammaOpt = None,
        lam: LamOpt = 0.2,
        candidates: CandOpt = 50,
        json_out: JsonOption = False,
    ) -> None:
        """Plausible deniability: N_w (fraction unchanged) and S_w (distinct releases in k draws)."""
        from ..pointspace import PointSpace
        from ..text.stats import QUANTILES, plausible_deniability, plot_deniability

        if plot is not None:
            check_output(plot, "--plot")
            from .._optional import require

            require("plot", what="--plot")
        _require(mechanism, embeddings, index)
        sample, _labels, space, desc, eps = _build(
            mechanism, epsilon, embeddings, vocabulary_size, _params(mechanism, index, gamma, lam, candidates)
        )
        if space is None:  # a mechanism file: distances from its points, when it has them
            from ..mechanisms.file import load_mechanism

            mech = load_mechanism(mechanism)
            if mech.space.points is None:
                raise ValidationError(f"{mechanism}: the mechanism file has no points; stats needs word vectors")
            space = PointSpace.from_points(mech.space.points, mech.labels)
        if seed is not None:
            warn(_SEED_WARNING)
        generator = None if seed is None else np.random.default_rng(seed)
        # the measured words: a public choice, so a fixed seed (0) is right here
        chosen = np.sort(
            np.random.default_rng(0).choice(min(top, space.n), size=min(words, space.n, top), replace=False)
        )
        st = plausible_deniability(lambda i: sample(i, rng=generator), space, chosen, draws)
        q = st.quantiles()
        if plot is not None:
            plot_deniability(st, plot, f"{desc}, eps={eps:.4g}, k={draws}")
        if json_out:
            echo_json(
                {
                    "mechanism": desc,
                    "epsilon": eps,
                    "words": len(chosen),
                    "draws": draws,
                    "quantiles": list(QUANTILES),
                    **q,
                    "plot": str(plot) if plot else None,
                }
            )
            return
        table = Table(title=f"{desc}, epsilon={eps:.6g}, {len(chosen)} words, k={draws} draws")
        table.add_column("quantile")
        for name in ("N_w", "S_w", "loss (mean distance)"):
            table.add_column(name, justify="right")
        for i, qq in enumerate(QUANTILES):
            table.add_row(f"{qq:g}", f"{q['N_w'][i]:.3f}", f"{q['S_w'][i]:.1f}", f"{q['loss'][i]:.3f}")
        console.print(table)
        if plot is not None:
            err_console.print(f"wrote {plot}", markup=False, highlight=False)

    app.add_typer(text_app, name="text")
