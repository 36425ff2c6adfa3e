"""Streaming rewriting of texts: plain text (one document per line) or a table's text column.

Every word token found in the vocabulary (by its normal form, :func:`.tokens.normal`:
format characters removed, NFKC, case folded) and not in ``keep`` is replaced by a release
of the mechanism, in the original's case pattern (:func:`.tokens.restore_case`), written
without the format characters the token held; whitespace, punctuation and
out-of-vocabulary tokens are kept. Number tokens (:func:`.tokens.is_numeric`) never reach
the word mechanism: they are kept, or released as numbers by a :class:`.numbers.NumberRelease`.

Documents are read in batches of about ``batch_tokens`` word tokens (memory bounded by the
batch whatever the corpus size) and each batch is sampled in pieces of ``piece_tokens``,
progress reported after each. The law of a release does not depend on the pieces (every
mechanism draws each token independently given its input), but the order in which a seeded
generator's numbers are used does, so a seeded run's output depends on ``piece_tokens``.

A sampler may return -1 for a token: the token is *withheld* (a per-person budget or cap,
:mod:`.accounted`) and written as :data:`WITHHELD`, a fixed placeholder that carries nothing
of the word (not its case, not its length); a clitic kept beside it stays, as it does beside
a release. A number token is withheld the same way when the accounting's
:meth:`~.accounting.TextAccounting.number` says so (the numbers' own per-person plan), and then
nothing is drawn for it.

Files: every input is read and written by the format layer (:mod:`metricdp.tabular.formats`,
:func:`~metricdp.tabular.formats.text_format`) and released by the one chunk loop of
:mod:`metricdp.pipeline.run` with the kind :class:`metricdp.pipeline.text.Texts`, one
:class:`Rewriter` across its chunks: the documents are a table's text column (CSV, Parquet,
Feather, JSON lines), or the one column of a plain-text file (:mod:`metricdp.tabular.formats.lines`:
each line a document, its ending kept).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress, report
from ..errors import ValidationError
from ..pipeline.run import Source, release_pass
from ..pipeline.text import Texts, read_only
from ..tabular.columns import ColumnPlan
from ..tabular.formats import output_format, text_format
from .accounting import TextAccounting, check_persons
from .numbers import NumberRelease
from .policy import TokenPolicy
from .tokens import FORMAT_CHARS, has_hidden_form, is_numeric, normal, restore_case, split

__all__ = ["CHUNK_DOCUMENTS", "WITHHELD", "RewriteStats", "Rewriter", "Vocabulary", "rewrite_file", "rewrite_texts"]

#: What a withheld word token becomes in the rewritten text: the same for every word, so it
#: tells only that a vocabulary word stood there, which the layout already shows.
WITHHELD = "[WITHHELD]"

#: Documents per chunk of a typed table or a plain-text file (a CSV chunk is bounded by its bytes): a document
#: is a review or a post, not a short field, so a chunk holds about as many bytes as the CSV reader's.
CHUNK_DOCUMENTS = 10_000

_FORMAT = re.compile(f"[{FORMAT_CHARS}]")

Sampler = Callable[..., NDArray[np.intp]]  # sample(inputs) or, with cycle > 1, sample(inputs, slots)


@dataclass
class RewriteStats:
    """Counts of a rewrite: word tokens seen, replaced (released), changed, withheld, kept, out of
    vocabulary; numbers released as numbers (and how many documents released each count of them) and
    numbers withheld by a per-person budget or cap (:mod:`.accounted`);
    tokens whose normal form differs from their text (format characters, compatibility forms
    such as fullwidth letters: ``normalised``)."""

    documents: int = 0
    tokens: int = 0
    replaced: int = 0
    changed: int = 0
    withheld: int = 0
    kept: int = 0
    kept_by: dict[str, int] = field(default_factory=dict)
    columns: ColumnPlan | None = None  # what leaves (CSV/JSONL): released, kept unreleased, dropped
    oov: int = 0
    seconds: float = 0.0
    oov_examples: dict[str, int] = field(default_factory=dict)
    numbers: int = 0
    numbers_withheld: int = 0
    numbers_per_document: dict[int, int] = field(default_factory=dict)  # numbers released -> documents
    normalised: int = 0

    @property
    def max_numbers_per_document(self) -> int:
        """The most numbers one document released as numbers (0 when none did)."""
        return max((k for k, v in self.numbers_per_document.items() if v), default=0)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")


class Vocabulary:
    """Lookup of labels by normal form: ``normal(label) -> index`` (:func:`.tokens.normal`; the first
    label wins)."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = tuple(labels)
        self.lookup: dict[str, int] = {}
        for i, lab in enumerate(self.labels):
            self.lookup.setdefault(normal(lab), i)


class Rewriter:
    """Rewrites documents batch by batch (the module docstring); its counts, timing and progress run across
    calls, so a file read chunk by chunk is rewritten by one rewriter, one :meth:`rewrite` per chunk.

    Parameters are those of :func:`rewrite_texts`. Each :meth:`rewrite` call ends with a
    batch of its own (a batch never spans two calls): the law of the output is the same
    (every token is drawn independently given its input), the use of a seeded generator's
    numbers follows the batches.
    """

    def __init__(
        self,
        vocabulary: Vocabulary,
        sample: Sampler,
        *,
        keep: frozenset[str] = frozenset(),
        policy: TokenPolicy | None = None,
        stats: RewriteStats | None = None,
        batch_tokens: int = 500_000,
        progress: Progress | None = None,
        cycle: int = 1,
        accounting: TextAccounting | None = None,
        read_fraction: Callable[[], float] | None = None,
        numbers: NumberRelease | None = None,
        piece_tokens: int = 4096,
    ) -> None:
        if cycle > 1 and accounting is not None:
            raise ValidationError("per-token epsilon lists are not accounted per document yet: use one epsilon")
        if piece_tokens < 1:
            raise ValidationError(f"piece_tokens must be >= 1, got {piece_tokens!r}")
        self.vocabulary, self.sample, self.keep = vocabulary, sample, keep
        self.policy = policy if policy is not None else TokenPolicy()
        self.stats = stats if stats is not None else RewriteStats()
        self.batch_tokens, self.progress, self.cycle = batch_tokens, progress, cycle
        self.accounting, self.read_fraction, self.numbers = accounting, read_fraction, numbers
        self.piece_tokens = piece_tokens
        self._start: float | None = None  # the first rewrite's start: the rate counts the rewriting only
        self._done = 0  # word tokens of the batches already written

    def _tell(self, tokens: int) -> None:
        st = self.stats
        st.seconds = time.perf_counter() - (self._start or 0.0)
        share = self.read_fraction() if self.read_fraction is not None and self.progress is not None else 0.0
        report(self.progress, tokens, round(st.tokens / share) if share > 0 else None, "rewriting")

    def _in_pieces(self, words: NDArray[np.intp], ranks: list[int]) -> NDArray[np.intp]:
        """The batch's releases, drawn about ``piece_tokens`` at a time (progress after each piece).

        The pieces cut the batch sorted by word, at word boundaries: every token of a word is
        drawn in the same piece, so a mechanism that builds one table per distinct word and
        call (:mod:`.exponential`) builds it once per batch, as with one call.
        """
        n = len(words)
        out = np.empty(n, dtype=np.intp)
        order = np.argsort(words, kind="stable")
        grouped = words[order]
        slot = np.asarray(ranks, dtype=np.intp) if self.cycle > 1 else None
        pending = self.stats.tokens - self._done
        lo, step = 0, self.piece_tokens
        while lo < n:
            hi = n if lo + step >= n else int(np.searchsorted(grouped, grouped[lo + step - 1], "right"))
            take = order[lo:hi]
            out[take] = self.sample(words[take]) if slot is None else self.sample(words[take], slot[take])
            if hi < n:
                self._tell(self._done + pending * hi // n)
            lo = hi
        return out

    def rewrite(self, texts: Iterable[str]) -> Iterator[str]:
        """Rewritten ``texts``, in order (a generator: consumes ``texts`` batch by batch)."""
        if self._start is None:
            self._start = time.perf_counter()
        st, policy, numbers, cycle = self.stats, self.policy, self.numbers, self.cycle
        lookup, labels, keep = self.vocabulary.lookup, self.vocabulary.labels, self.keep
        batch: list[list[str]] = []
        slots: list[tuple[int, int, str, str]] = []  # (document in batch, piece, original, kept clitic)
        inputs: list[int] = []
        ranks: list[int] = []  # (cycle > 1) each input's index among its document's word tokens, mod cycle

        def flush() -> Iterator[str]:
            if inputs or self.accounting is not None:
                words = np.asarray(inputs, dtype=np.intp)
                if self.accounting is not None:
                    out = self.accounting.release(words, [s[0] for s in slots], len(batch),
                                                  lambda w: self._in_pieces(w, ranks))
                else:
                    out = self._in_pieces(words, ranks)
                for (doc, piece, original, suffix), k, x in zip(slots, out, inputs, strict=True):
                    if k < 0:  # withheld by a budget or a cap: the placeholder, not a release
                        batch[doc][piece] = WITHHELD + suffix
                        st.withheld += 1
                        st.replaced -= 1
                        continue
                    batch[doc][piece] = restore_case(labels[k], original) + suffix
                    st.changed += int(k != x)
            yield from ("".join(pieces) for pieces in batch)
            self._done = st.tokens
            self._tell(st.tokens)
            batch.clear()
            slots.clear()
            inputs.clear()
            ranks.clear()

        for text in texts:
            pieces = []
            d = len(batch)
            sentence_start = True
            rank = -1
            released_numbers = st.numbers
            for j, (piece, is_word) in enumerate(split(text)):
                pieces.append(piece)
                if not is_word:
                    sentence_start = sentence_start or TokenPolicy.ends_sentence(piece)
                    continue
                at_start, sentence_start = sentence_start, False
                st.tokens += 1
                rank += 1
                low = normal(piece)
                if has_hidden_form(piece):
                    st.normalised += 1
                if is_numeric(piece):  # a number: never a word's input (nor a word's output: the output policies)
                    if numbers is not None and numbers.releasable(piece):
                        if self.accounting is None or self.accounting.number(d):
                            pieces[j] = numbers.release_token(piece)
                            st.numbers += 1
                        else:  # withheld by the numbers' budget or cap: the placeholder, nothing drawn
                            pieces[j] = WITHHELD
                            st.numbers_withheld += 1
                    else:
                        st.kept += 1
                        st.kept_by["numbers"] = st.kept_by.get("numbers", 0) + 1
                    continue
                if low in keep:
                    st.kept += 1
                    st.kept_by["words"] = st.kept_by.get("words", 0) + 1
                    continue
                category = policy.kept_as(low, piece, at_start)
                if category is not None:
                    st.kept += 1
                    st.kept_by[category] = st.kept_by.get(category, 0) + 1
                    continue
                k = lookup.get(low)
                suffix = ""
                cut = max(piece.rfind("'"), piece.rfind("\u2019"))
                if k is None and cut > 0:
                    # "NASA's": GloVe splits the clitic off; release the head, keep the clitic
                    k = lookup.get(normal(piece[:cut]))
                    if k is not None:
                        piece, suffix = piece[:cut], _FORMAT.sub("", piece[cut:])
                if k is None:
                    st.oov += 1
                    if len(st.oov_examples) < 1000 or low in st.oov_examples:
                        st.oov_examples[low] = st.oov_examples.get(low, 0) + 1
                    continue
                st.replaced += 1
                slots.append((d, j, piece, suffix))
                inputs.append(k)
                if cycle > 1:
                    ranks.append(rank % cycle)
            batch.append(pieces)
            st.documents += 1
            if numbers is not None:
                count = st.numbers - released_numbers
                st.numbers_per_document[count] = st.numbers_per_document.get(count, 0) + 1
            if len(inputs) >= self.batch_tokens:
                yield from flush()
        yield from flush()


def rewrite_texts(
    texts: Iterable[str],
    vocabulary: Vocabulary,
    sample: Sampler,
    *,
    keep: frozenset[str] = frozenset(),
    policy: TokenPolicy | None = None,
    stats: RewriteStats | None = None,
    batch_tokens: int = 500_000,
    progress: Progress | None = None,
    cycle: int = 1,
    accounting: TextAccounting | None = None,
    read_fraction: Callable[[], float] | None = None,
    numbers: NumberRelease | None = None,
    piece_tokens: int = 4096,
) -> Iterator[str]:
    """Rewritten texts, in order (a generator: consumes ``texts`` batch by batch; :class:`Rewriter`).

    ``keep``: words (lower case) never replaced; ``policy``: categories never replaced
    (:class:`.policy.TokenPolicy`; its output restriction is the sampler's business, see
    :class:`.policy.OutputFilter`). ``cycle`` > 1: the sampler is called as ``sample(inputs,
    slots)`` with ``slots[i]`` the index of token i among its document's word tokens modulo
    ``cycle`` (per-token epsilon lists: token j of a document gets the (j mod m)-th epsilon).
    ``accounting`` (:mod:`.accounting`) counts each document's releases and makes them
    consistent (one epsilon per run: not with ``cycle`` > 1). ``numbers``: releases number tokens
    (:mod:`.numbers`; None: they are kept, counted under ``kept_by["numbers"]``).

    ``progress`` is told after each batch: the tokens done and, with ``read_fraction`` (the
    share of the input read so far, e.g. bytes of the file), the tokens expected in all
    (``tokens / read_fraction()``), from which it can tell the time left; it is told after each
    piece of ``piece_tokens`` releases as well (with ``accounting``: of the draws it asks for).
    """
    return Rewriter(vocabulary, sample, keep=keep, policy=policy, stats=stats, batch_tokens=batch_tokens,
                    progress=progress, cycle=cycle, accounting=accounting, read_fraction=read_fraction,
                    numbers=numbers, piece_tokens=piece_tokens).rewrite(texts)


def rewrite_file(
    path: str | PathLike[str],
    out: str | PathLike[str] | None,
    vocabulary: Vocabulary,
    sample: Sampler,
    *,
    column: str | None = None,
    keep: frozenset[str] = frozenset(),
    policy: TokenPolicy | None = None,
    keep_columns: Sequence[str] = (),
    drop_columns: Sequence[str] = (),
    max_record: int | None = None,
    batch_tokens: int = 500_000,
    progress: Progress | None = None,
    cycle: int = 1,
    accounting: TextAccounting | None = None,
    numbers: NumberRelease | None = None,
    inputs: Sequence[str | PathLike[str] | None] = (),
    run: Any = None,
) -> RewriteStats:
    """Rewrite ``path`` into the file ``out`` in the same format (see the module docstring); returns the counts.

    ``out`` appears whole when everything went through, never in part
    (:func:`metricdp.io.atomic_write`; ``inputs``: further files it must not be); None
    writes nothing (a first pass that counts). The input's format and the documents' column
    are :func:`metricdp.tabular.formats.text_format`'s (``column`` names a table's text
    field; plain text, ``column`` None, is its lines); every input goes through the one
    chunk loop (:func:`metricdp.pipeline.run.release_pass` with
    :class:`metricdp.pipeline.text.Texts`): every byte of a CSV or a plain-text file but the
    released documents is kept, a Parquet file keeps its schema, and what leaves unreleased
    from a table is planned by :func:`metricdp.tabular.columns.plan_columns`
    (``keep_columns``, ``drop_columns``; JSON lines: by field name) and checked by content
    (:meth:`metricdp.tabular.leaks.LeakRule.text`); :attr:`RewriteStats.columns` names it (None
    for plain text, whose documents are the whole file). A chunk (a CSV reader's few MB,
    :data:`CHUNK_DOCUMENTS` rows of a typed table or lines of plain text) ends a batch; a
    missing value (a null in a typed table) is refused with its count and first rows. An
    ``out`` whose suffix names another format than the input's is refused. Lines of plain
    text and JSON lines, like CSV records, are capped at ``max_record`` bytes
    (:func:`metricdp.tabular.csv.max_record_bytes`).

    ``run`` (anything with ``publishing``, ``abort``, ``commit`` and ``report``: an accounted
    rewrite, :mod:`.accounted`) is told ``publishing()`` just before ``out`` is published,
    then settled (:class:`metricdp.streaming.accounted.Settlement`).
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"{path}: no such file")
    fmt, documents = text_format(path, column)
    check_persons(fmt, column, None if accounting is None else accounting.user_column)
    # a table names its columns; without ``column`` (text_format: plain text) the documents are the whole file
    named = column is not None
    if not named and (keep_columns or drop_columns):
        raise ValidationError(f"{path}: plain text has no columns to keep or drop")
    st = RewriteStats()
    size = max(1, path.stat().st_size)
    rewriter = Rewriter(vocabulary, sample, keep=keep, policy=policy, stats=st, batch_tokens=batch_tokens,
                        progress=progress, cycle=cycle, accounting=accounting, numbers=numbers)
    source = Source(path, fmt, CHUNK_DOCUMENTS, max_record=max_record)
    kind = Texts(documents, rewriter, where=source.where)
    # what leaves, by name and content (a copy of the text is refused), before anything is written
    plan = source.plan(kind, keep_columns, drop_columns)
    if kind.user_column is not None and kind.user_column not in plan.header:
        raise ValidationError(f"{path}: no user column {kind.user_column!r}")
    st.columns = plan if named else None
    header = sum(map(len, plan.header)) + len(plan.header) if named else 0  # the bytes before the first row
    rewriter.read_fraction = lambda: kind.read_fraction(size, header)
    if out is None:
        read_only(kind, source, plan)
        return st
    output_format(fmt, out, written_only=False)
    release_pass(kind, source, out, plan, inputs=[p for p in inputs if p is not None], run=run)
    return st
