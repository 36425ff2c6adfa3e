"""Real English text that every Python installation ships: the standard library's documentation.

The text benchmarks need a real corpus, with the distinct-word rate of real prose, that
installs with no download: the CPython standard library carries its own documentation,
``pydoc_data.topics`` (the language reference and library topics that ``help()`` shows)
and the docstrings of its modules. :func:`stdlib_documents` yields them as documents in a
fixed order (topics by name, then modules by path), one paragraph per document, so a
corpus of a given size is the same on every machine with the same Python version.

The text is technical English (names of functions appear as words) rather than fiction;
its distinct-word rate (:func:`corpus_summary`) is what the benchmark reports beside the
throughput, so a reader can compare it with their own corpus. :func:`zipf_tokens` is the
synthetic corpus beside it (word indices drawn by a Zipf law); :data:`CORPORA` names both.
"""

from __future__ import annotations

import ast
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["CHUNK", "CORPORA", "corpus_summary", "named_corpus", "stdlib_documents", "stdlib_text", "zipf_tokens"]

#: The bundled corpora by name: the synthetic Zipf stream and real English text (the standard library's documentation).
CORPORA = ("zipf", "stdlib-docs")
CHUNK = 1_000_000  # tokens per chunk of the Zipf stream
_SKIP_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "lib2to3"})


def _paragraphs(text: str) -> Iterator[str]:
    for para in text.split("\n\n"):
        flat = " ".join(para.split())
        if flat:
            yield flat


def _module_docstrings(root: Path) -> Iterator[str]:
    for path in sorted(root.rglob("*.py")):
        if _SKIP_DIRS.intersection(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    yield doc


def stdlib_documents() -> Iterator[str]:
    """Paragraphs of the standard library's documentation, in a fixed order (a generator)."""
    from pydoc_data.topics import topics

    for name in sorted(topics):
        yield from _paragraphs(topics[name])
    for doc in _module_docstrings(Path(sysconfig.get_paths()["stdlib"])):
        yield from _paragraphs(doc)


def stdlib_text(min_tokens: int) -> list[str]:
    """The first documents of :func:`stdlib_documents` holding at least ``min_tokens`` word tokens."""
    from ..text.tokens import WORD

    docs: list[str] = []
    count = 0
    for doc in stdlib_documents():
        docs.append(doc)
        count += sum(1 for _ in WORD.finditer(doc))
        if count >= min_tokens:
            return docs
    return docs


def corpus_summary(documents: list[str]) -> dict[str, int]:
    """Documents, word tokens and distinct words (case-insensitive) of a corpus."""
    from ..text.tokens import WORD

    words = [m.group().lower() for doc in documents for m in WORD.finditer(doc)]
    return {"documents": len(documents), "tokens": len(words), "distinct_words": len(set(words))}


def named_corpus(name: str, tokens: int, labels: Sequence[str]) -> list[str]:
    """The bundled corpus ``name`` (:data:`CORPORA`) as documents of about ``tokens`` word tokens in all.

    ``stdlib-docs``: :func:`stdlib_text`; ``zipf``: the benchmark's Zipf stream over the words
    ``labels`` (:func:`metricdp.experiments.bench_text.zipf_tokens`, seed 0), 1,000 words a document.
    """
    from ..errors import ValidationError

    if name == "stdlib-docs":
        return stdlib_text(tokens)
    if name == "zipf":
        chunks = zipf_tokens(tokens, top=min(20_000, len(labels)), chunk=1000)
        return [" ".join(labels[i] for i in chunk.tolist()) for chunk in chunks]
    raise ValidationError(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")


def zipf_tokens(tokens: int, *, top: int = 20_000, seed: int = 0, chunk: int = CHUNK) -> Iterator[NDArray[np.intp]]:
    """Chunks of word indices, rank k (0-based) with probability proportional to 1/(k+1)."""
    p = 1.0 / np.arange(1, top + 1)
    cdf = np.cumsum(p / p.sum())
    g = np.random.default_rng(seed)
    left = int(tokens)
    while left > 0:
        k = min(chunk, left)
        yield np.minimum(np.searchsorted(cdf, g.random(k) * cdf[-1], side="right"), top - 1).astype(np.intp)
        left -= k
