"""Privacy per document (or per author) of a text rewrite, and consistent replacements.

A document's released words compose (``docs/proofs/composition.md``, Theorem 1): with
``t`` word tokens released at eps each, the document is ``t eps``-mDP w.r.t. the summed
distance between its words and another document's (position by position), and a word
repeated ``k`` times is protected at ``k eps`` (Corollary 2: averaging the k releases
recovers it). :class:`TextAccounting` counts, per document, the tokens released, the
distinct words, the document's eps and the eps of its most repeated word.

With ``consistent``, the same word in one document gets one replacement, drawn once from
the mechanism and repeated (post-processing, Corollary 3): a document then costs
``(distinct words) eps`` and a repeated word ``eps``; the repeats disclose which tokens
are the same word. With a ``user_column`` (CSV/JSONL), the person is the author: the same
word of one author gets one replacement across all of the author's documents, and the
author's eps is the sum over their documents of the fresh replacements drawn.

Everything per batch is numpy over the batch's tokens: (document, word) pairs are coded
as one int64 and counted with :func:`numpy.unique`; the memo of an author's replacements
is a sorted key array searched with :func:`numpy.searchsorted`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..accounting.composition import EpsilonSummary, from_units, summarize, to_units
from ..errors import ValidationError

if TYPE_CHECKING:
    from ..tabular.formats import Format

__all__ = ["DocumentReport", "TextAccounting", "check_persons"]


def check_persons(fmt: Format, column: str | None, user_column: str | None, *, ledger: object = None) -> None:
    """Refuse a person that means nothing: an author's field that is the text's, or is looked for in a file
    without named fields (plain text), and a ledger over documents numbered by their line (``fmt``: the
    input's format, :func:`metricdp.tabular.formats.text_format`).

    A ledger adds a person's spend of this run to their spend of earlier runs, so its persons
    must keep their identity from one file to the next: an author, or a stable document id,
    named by ``user_column``; the line number of a document does not.
    """
    if user_column is not None and (not fmt.named or user_column == column):
        raise ValidationError("the parameter 'user_column' names the author's field of a .csv/.jsonl input (not "
                              "the text's)")
    if ledger is not None and user_column is None:
        raise ValidationError("the parameter 'ledger' needs the parameter 'user_column' (a .csv/.jsonl field naming "
                              "the author or a stable document id): a ledger's persons keep their identity across "
                              "runs, and a document's line number is not the same person from one run to the next")


@dataclass(frozen=True)
class DocumentReport:
    """Per document: tokens released, distinct words, eps (summed distance) and eps of a repeated word."""

    tokens: NDArray[np.int64]
    distinct: NDArray[np.int64]
    eps: NDArray[np.float64]
    eps_repeated_word: NDArray[np.float64]
    persons: EpsilonSummary | None

    def as_dict(self) -> dict[str, Any]:
        def dist(values: NDArray[Any]) -> dict[str, Any]:
            return summarize(values.astype(np.float64)).as_dict()

        return {"documents": int(self.tokens.size), "tokens_released": dist(self.tokens),
                "distinct_words": dist(self.distinct), "eps_per_document": dist(self.eps),
                "eps_repeated_word": dist(self.eps_repeated_word),
                "eps_per_author": None if self.persons is None else self.persons.as_dict()}


class TextAccounting:
    """Counts a rewrite per document (and author) and makes replacements consistent (module docstring).

    ``vocabulary`` is the number of labels (word indices are below it).
    """

    def __init__(self, eps: float, vocabulary: int, *, consistent: bool = False,
                 user_column: str | None = None) -> None:
        self.eps, self.vocabulary = float(eps), int(vocabulary)
        self._units = to_units(eps)  # reports in exact accounting units (0.004 x 3 is 0.012)
        self.consistent, self.user_column = consistent, user_column
        self._persons: dict[str, int] = {}
        self._doc_person: list[int] = []
        self._done = 0
        self._parts: list[tuple[NDArray[np.int64], ...]] = []
        self._keys = np.zeros(0, dtype=np.int64)
        self._values = np.zeros(0, dtype=np.intp)
        self._person_fresh = np.zeros(0, dtype=np.int64)
        self._index: int | None = None

    # ------------------------------------------------------------------ who wrote each document
    def _add_person(self, value: object, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise ValidationError(f"{where}: user column {self.user_column!r} is empty or not text: every document "
                                  "needs an author")
        self._doc_person.append(self._persons.setdefault(str(value), len(self._persons)))

    def add_row(self, row: Sequence[str], names: Sequence[str], where: str) -> None:
        """The author of the next CSV document (``names``: the header)."""
        if self.user_column is None:
            return
        if self._index is None:
            if self.user_column not in names:
                raise ValidationError(f"{where}: no user column {self.user_column!r}")
            self._index = list(names).index(self.user_column)
        self._add_person(row[self._index], where)

    def add_record(self, record: dict[str, Any], where: str) -> None:
        """The author of the next JSONL document."""
        if self.user_column is not None:
            self._add_person(record.get(self.user_column), where)

    # ------------------------------------------------------------------ releases
    def number(self, doc_in_batch: int) -> bool:
        """Whether the next number token, of document ``doc_in_batch`` of the batch being read, is released
        (True) or withheld; here always released: a per-person plan (:mod:`.accounted`) decides otherwise."""
        return True

    def release(self, words: NDArray[np.intp], doc_in_batch: Sequence[int], n_docs: int,
                sample: Callable[[NDArray[np.intp]], NDArray[np.intp]]) -> NDArray[np.intp]:
        """Replacements of one batch's ``words`` (``doc_in_batch[i]``: token i's document in the batch)."""
        d = np.asarray(doc_in_batch, dtype=np.int64)
        x = np.asarray(words, dtype=np.int64)
        if x.size == 0:  # documents without a word to release
            self._count(d, x, n_docs)
            self._done += n_docs
            return np.zeros(0, dtype=np.intp)
        v = self.vocabulary
        pair, inverse, pair_doc = self._count(d, x, n_docs)
        if not self.consistent:
            out = np.asarray(sample(words), dtype=np.intp)
            fresh_owner = d
        elif self.user_column is None:  # one replacement per (document, word); documents never span batches
            drawn = np.asarray(sample((pair % v).astype(np.intp)), dtype=np.intp)
            out, fresh_owner = drawn[inverse], pair_doc
        else:
            out, fresh_owner = self._by_author(d, x, sample)
        if self.user_column is not None:
            doc_person = np.asarray(self._doc_person[self._done:self._done + n_docs], dtype=np.int64)
            if doc_person.size != n_docs:
                raise ValidationError("a document without an author")  # pragma: no cover - readers add one each
            owners = doc_person[fresh_owner] if not self.consistent else fresh_owner
            grown = np.zeros(len(self._persons), dtype=np.int64)
            grown[: self._person_fresh.size] = self._person_fresh
            grown += np.bincount(owners, minlength=grown.size)
            self._person_fresh = grown
        self._done += n_docs
        return out

    def _count(self, d: NDArray[np.int64], x: NDArray[np.int64],
               n_docs: int) -> tuple[NDArray[np.int64], NDArray[np.intp], NDArray[np.int64]]:
        """Count one batch's released tokens ``x`` of documents ``d`` (in the batch) for :meth:`report`.

        Returns the batch's distinct (document, word) pairs coded ``d * vocabulary + x``,
        each token's pair and each pair's document.
        """
        v = self.vocabulary
        pair, inverse, counts = np.unique(d * v + x, return_inverse=True, return_counts=True)
        pair_doc = pair // v
        tokens = np.bincount(d, minlength=n_docs).astype(np.int64)
        distinct = np.bincount(pair_doc, minlength=n_docs).astype(np.int64)
        repeat = np.zeros(n_docs, dtype=np.int64)
        np.maximum.at(repeat, pair_doc, counts)
        self._parts.append((tokens, distinct, repeat))
        return pair, inverse.ravel(), pair_doc

    def _by_author(self, d: NDArray[np.int64], x: NDArray[np.int64],
                   sample: Callable[[NDArray[np.intp]], NDArray[np.intp]]) -> tuple[NDArray[np.intp], NDArray[Any]]:
        """One replacement per (author, word) across the run; returns them and the authors of the fresh draws."""
        v = self.vocabulary
        person = np.asarray(self._doc_person, dtype=np.int64)[self._done + d]
        keys, inverse = np.unique(person * v + x, return_inverse=True)
        pos = np.minimum(np.searchsorted(self._keys, keys), max(self._keys.size - 1, 0))
        hit = (self._keys[pos] == keys) if self._keys.size else np.zeros(keys.size, dtype=bool)
        values = np.empty(keys.size, dtype=np.intp)
        values[hit] = self._values[pos[hit]]
        fresh = np.flatnonzero(~hit)
        values[fresh] = np.asarray(sample((keys[fresh] % v).astype(np.intp)), dtype=np.intp)
        merged = np.concatenate([self._keys, keys[fresh]])
        order = np.argsort(merged, kind="stable")
        self._keys, self._values = merged[order], np.concatenate([self._values, values[fresh]])[order]
        return values[inverse.ravel()], keys[fresh] // v

    def report(self, documents: int) -> DocumentReport:
        """The per-document report of the ``documents`` documents rewritten."""
        cols = [np.concatenate([p[k] for p in self._parts]) if self._parts else np.zeros(0, np.int64)
                for k in range(3)]
        tokens, distinct, repeat = (np.concatenate([c, np.zeros(documents - c.size, np.int64)]) for c in cols)
        eps_doc = from_units((distinct if self.consistent else tokens) * self._units)
        eps_word = from_units((np.minimum(repeat, 1) if self.consistent else repeat) * self._units)
        persons = None
        if self.user_column is not None:
            fresh = np.zeros(len(self._persons), dtype=np.int64)
            fresh[: self._person_fresh.size] = self._person_fresh
            persons = summarize(from_units(fresh * self._units))
        return DocumentReport(tokens, distinct, eps_doc, eps_word, persons)
