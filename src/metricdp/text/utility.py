r"""What a text release costs in meaning: per mechanism and epsilon, on a corpus.

For each (mechanism, eps) the corpus is rewritten exactly as ``metricdp text privatize``
does (same tokenisation, token policy and output filter) without writing it, and three
numbers are kept:

* ``changed`` -- the fraction of released word tokens whose release differs from the input
  word (1 - the corpus-level :math:`N_w` of Feyisetan et al., WSDM 2020);
* ``mean_distance`` -- the mean Euclidean embedding distance between each released token
  and its input (0 for the tokens left unchanged): the average move in meaning;
* ``examples`` -- the first changed pairs (``input -> release``), to read.

Side by side against eps (:func:`plot_utility`) they show which mechanism buys the most
meaning per unit of epsilon (docs/text.md, "Choosing a mechanism"). Nothing here is a
release: the statistics are computed from the true text and are for the person choosing
the mechanism, not for publication.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..pointspace import PointSpace
from .policy import TokenPolicy
from .rewrite import Vocabulary, rewrite_texts

__all__ = ["UtilityRow", "plot_utility", "replacement_summary", "utility_rows"]

Sampler = Callable[[NDArray[np.intp]], NDArray[np.intp]]


@dataclass
class UtilityRow:
    """One mechanism at one epsilon on the corpus."""

    mechanism: str
    epsilon: float
    tokens: int = 0
    changed: float | None = None
    mean_distance: float | None = None
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "tokens": self.tokens, "changed": self.changed,
                "mean_distance": self.mean_distance, "examples": list(self.examples)}


def replacement_summary(
    space: PointSpace, pairs: Sequence[tuple[NDArray[np.intp], NDArray[np.intp]]], examples: int = 8
) -> dict[str, Any]:
    """``changed``, ``mean_distance`` (over every released token) and the first ``examples`` changed
    pairs of (input, release) index arrays."""
    if not pairs or not sum(len(a) for a, _ in pairs):
        return {"changed": None, "mean_distance": None, "examples": []}
    x = np.concatenate([a for a, _ in pairs])
    y = np.concatenate([b for _, b in pairs])
    total = 0.0
    step = 1 << 16  # vectors of a block of pairs at a time
    for start in range(0, len(x), step):
        a, b = x[start : start + step], y[start : start + step]
        total += float(np.linalg.norm(space.vectors[a] - space.vectors[b], axis=1).sum())
    moved = np.flatnonzero(x != y)
    return {
        "changed": len(moved) / len(x),
        "mean_distance": total / len(x),
        "examples": [f"{space.labels[x[i]]} -> {space.labels[y[i]]}" for i in moved[:examples]],
    }


def utility_rows(
    space: PointSpace,
    texts: Iterable[str],
    samplers: Iterable[tuple[str, float, Sampler]],
    *,
    policy: TokenPolicy | None = None,
    examples: int = 8,
) -> list[UtilityRow]:
    """One :class:`UtilityRow` per ``(mechanism name, eps, sampler)``; ``texts`` is read once (kept
    in memory) and rewritten by each sampler (a sampler includes the output filter, if any).
    ``samplers`` may be a generator: each sampler is then built when its turn comes and freed
    after it (its caches with it)."""
    docs = list(texts)
    vocabulary = Vocabulary(space.labels)
    rows = []
    for name, eps, sample in samplers:
        pairs: list[tuple[NDArray[np.intp], NDArray[np.intp]]] = []

        def record(
            idx: NDArray[np.intp], sample: Sampler = sample, pairs: list[tuple[NDArray, NDArray]] = pairs
        ) -> NDArray[np.intp]:
            out = sample(idx)
            pairs.append((idx, out))
            return out

        for _ in rewrite_texts(docs, vocabulary, record, policy=policy):
            pass
        summary = replacement_summary(space, pairs, examples)
        rows.append(UtilityRow(name, float(eps), int(sum(len(a) for a, _ in pairs)), **summary))
    return rows


def plot_utility(rows: Sequence[UtilityRow], path: str | PathLike[str], title: str = "") -> None:
    """Fraction of tokens changed and mean embedding distance against eps (log scale), one curve per
    mechanism, side by side, written as a PNG (atomically)."""
    from .._figure import new_figure, save_png

    fig = new_figure(12.8, 4.4)
    axes = fig.subplots(1, 2)
    for name in dict.fromkeys(r.mechanism for r in rows):
        ok = sorted((r for r in rows if r.mechanism == name and r.changed is not None), key=lambda r: r.epsilon)
        eps = [r.epsilon for r in ok]
        axes[0].plot(eps, [r.changed for r in ok], "-o", markersize=4, linewidth=1.4, label=name)
        axes[1].plot(eps, [r.mean_distance for r in ok], "-o", markersize=4, linewidth=1.4, label=name)
    titles = (f"word tokens changed{': ' + title if title else ''}", "mean embedding distance of the release")
    labels = ("fraction of word tokens changed", "mean distance (embedding units)")
    for ax, head, label in zip(axes, titles, labels, strict=True):
        ax.set_title(head)
        ax.set_xlabel("epsilon per token")
        ax.set_ylabel(label)
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    save_png(fig, path)
