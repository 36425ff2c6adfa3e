"""Streaming rewriting of texts: plain text (one document per line), CSV or JSONL.

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
a release.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress, report
from ..errors import ValidationError
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import MAX_RECORD_ENV, iter_csv_rows, max_record_bytes
from ..tabular.formats import FORMATS, format_of
from ..tabular.leaks import LeakRule, check_file, scan_file
from .accounting import TextAccounting
from .numbers import NumberRelease
from .policy import TokenPolicy
from .tokens import FORMAT_CHARS, has_hidden_form, is_numeric, normal, restore_case, split

__all__ = ["WITHHELD", "RewriteStats", "Vocabulary", "detect_format", "rewrite_file", "rewrite_texts"]

#: What a withheld word token becomes in the rewritten text: the same for every word, so it
#: tells only that a vocabulary word stood there, which the layout already shows.
WITHHELD = "[WITHHELD]"

_FORMAT = re.compile(f"[{FORMAT_CHARS}]")

Sampler = Callable[..., NDArray[np.intp]]  # sample(inputs) or, with cycle > 1, sample(inputs, slots)


@dataclass
class RewriteStats:
    """Counts of a rewrite: word tokens seen, replaced (released), changed, withheld, kept, out of
    vocabulary; numbers released as numbers (and how many documents released each count of them);
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
    """Rewritten texts, in order (a generator: consumes ``texts`` batch by batch).

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
    if cycle > 1 and accounting is not None:
        raise ValidationError("per-token epsilon lists are not accounted per document yet: use one epsilon")
    if piece_tokens < 1:
        raise ValidationError(f"piece_tokens must be >= 1, got {piece_tokens!r}")
    st = stats if stats is not None else RewriteStats()
    policy = policy if policy is not None else TokenPolicy()
    lookup, labels = vocabulary.lookup, vocabulary.labels
    start = time.perf_counter()
    batch: list[list[str]] = []
    slots: list[tuple[int, int, str, str]] = []  # (document in batch, piece, original, kept clitic)
    inputs: list[int] = []
    ranks: list[int] = []  # (cycle > 1) each input's index among its document's word tokens, mod cycle
    done = [0]  # word tokens of the batches already written

    def tell(tokens: int) -> None:
        st.seconds = time.perf_counter() - start
        share = read_fraction() if read_fraction is not None and progress is not None else 0.0
        report(progress, tokens, round(st.tokens / share) if share > 0 else None, "rewriting")

    def in_pieces(words: NDArray[np.intp]) -> NDArray[np.intp]:
        """The batch's releases, drawn about ``piece_tokens`` at a time (progress after each piece).

        The pieces cut the batch sorted by word, at word boundaries: every token of a word is
        drawn in the same piece, so a mechanism that builds one table per distinct word and
        call (:mod:`.exponential`) builds it once per batch, as with one call.
        """
        n = len(words)
        out = np.empty(n, dtype=np.intp)
        order = np.argsort(words, kind="stable")
        grouped = words[order]
        slot = np.asarray(ranks, dtype=np.intp) if cycle > 1 else None
        pending = st.tokens - done[0]
        lo = 0
        while lo < n:
            hi = n if lo + piece_tokens >= n else int(np.searchsorted(grouped, grouped[lo + piece_tokens - 1], "right"))
            take = order[lo:hi]
            out[take] = sample(words[take]) if slot is None else sample(words[take], slot[take])
            if hi < n:
                tell(done[0] + pending * hi // n)
            lo = hi
        return out

    def flush() -> Iterator[str]:
        if inputs or accounting is not None:
            words = np.asarray(inputs, dtype=np.intp)
            if accounting is not None:
                out = accounting.release(words, [s[0] for s in slots], len(batch), in_pieces)
            else:
                out = in_pieces(words)
            for (doc, piece, original, suffix), k, x in zip(slots, out, inputs, strict=True):
                if k < 0:  # withheld by a budget or a cap: the placeholder, not a release
                    batch[doc][piece] = WITHHELD + suffix
                    st.withheld += 1
                    st.replaced -= 1
                    continue
                batch[doc][piece] = restore_case(labels[k], original) + suffix
                st.changed += int(k != x)
        yield from ("".join(pieces) for pieces in batch)
        done[0] = st.tokens
        tell(st.tokens)
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
                    pieces[j] = numbers.release_token(piece)
                    st.numbers += 1
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
        if len(inputs) >= batch_tokens:
            yield from flush()
    yield from flush()


def detect_format(path: Path, column: str | None) -> str:
    """``csv``, ``jsonl`` or ``text`` (:func:`metricdp.tabular.formats.format_of`; any other suffix
    is plain text, a table suffix that is not CSV is refused); CSV and JSONL need ``column``."""
    fmt = FORMATS.get(path.suffix.lower(), "text")
    if fmt not in ("csv", "jsonl", "text"):
        format_of(path, ("csv", "jsonl", "text"), what=f"{path}: a text input")  # raises, with the reason
    if fmt != "text" and column is None:
        raise ValidationError(f"{path}: a {fmt.upper()} input needs the parameter 'column' (the text's field)")
    if fmt == "text" and column is not None:
        raise ValidationError(
            f"{path}: the parameter 'column' applies to .csv/.jsonl inputs; this file is read as plain text"
        )
    return fmt


def _decoded_lines(path: Path, max_record: int | None = None) -> Iterator[str]:
    """Lines with their endings, decoded as UTF-8, each at most the record cap
    (:func:`metricdp.tabular.csv.max_record_bytes`: a hostile line never costs more memory than
    that); invalid bytes and an over-long line are one error naming the line and the offset."""
    cap = max_record_bytes(max_record)
    offset = 0
    with path.open("rb") as fh:
        for number in itertools.count(1):
            raw = fh.readline(cap + 1)
            if not raw:
                return
            if len(raw) > cap:
                raise ValidationError(
                    f"{path}: line {number} is longer than the cap of {cap:,} bytes (byte offset {offset:,}; "
                    f"set {MAX_RECORD_ENV} to raise it)"
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as ex:
                raise ValidationError(
                    f"{path}: invalid UTF-8 at byte offset {offset + ex.start} (line starting at byte {offset})"
                ) from None
            if offset == 0 and line.startswith("\ufeff"):
                line = line[1:]
            offset += len(raw)
            yield line


def _split_ending(line: str) -> tuple[str, str]:
    body = line.rstrip("\r\n")
    return body, line[len(body) :]


def rewrite_file(
    path: Path,
    out: IO[str],
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
) -> RewriteStats:
    """Rewrite ``path`` into the open text stream ``out`` in the same format (see the module docstring).

    CSV is read under the file layer's record definition (:mod:`metricdp.tabular.csv`), and
    what leaves unreleased is planned by :func:`metricdp.tabular.columns.plan_columns`
    (``keep_columns``, ``drop_columns``; JSONL: by field name); :attr:`RewriteStats.columns`
    names it. Plain-text and JSONL lines, like CSV records, are capped at ``max_record``
    bytes (:func:`metricdp.tabular.csv.max_record_bytes`).
    """
    if not path.is_file():
        raise ValidationError(f"{path}: no such file")
    fmt = detect_format(path, column)
    if fmt == "text" and (keep_columns or drop_columns):
        raise ValidationError(f"{path}: plain text has no columns to keep or drop")
    st = RewriteStats()
    read, size = [0], max(1, path.stat().st_size)  # characters read (about bytes): the ETA's share of the file
    kw = {"keep": keep, "policy": policy, "stats": st, "batch_tokens": batch_tokens, "progress": progress,
          "cycle": cycle, "accounting": accounting, "numbers": numbers,
          "read_fraction": lambda: min(1.0, read[0] / size)}
    if fmt == "text":
        endings: deque[str] = deque()

        def bodies() -> Iterator[str]:
            for line in _decoded_lines(path, max_record):
                read[0] += len(line)
                body, end = _split_ending(line)
                endings.append(end)
                yield body

        for text in rewrite_texts(bodies(), vocabulary, sample, **kw):  # type: ignore[arg-type]
            out.write(text + endings.popleft())
        return st
    if fmt == "csv":
        assert column is not None  # detect_format gives csv only with a column
        with iter_csv_rows(path, max_record=max_record) as (names, stream):
            plan = plan_columns(names, [column], keep=keep_columns, drop=drop_columns, where=str(path))
            check_file(path, plan, LeakRule.text(column), max_record=max_record)  # a copy of the text is refused
            st.columns = plan
            read[0] += sum(map(len, names)) + len(names)
            j = plan.index(column)
            written = [plan.index(c) for c in plan.written]
            writer = csv.writer(out, dialect="excel", lineterminator="\n")
            writer.writerow(plan.written)
            rows: deque[list[str]] = deque()

            def cells() -> Iterator[str]:
                for line, row in stream:
                    read[0] += sum(map(len, row)) + len(row)
                    rows.append(row)
                    if accounting is not None:
                        accounting.add_row(row, names, f"{path}: line {line}")
                    yield row[j]

            for text in rewrite_texts(cells(), vocabulary, sample, **kw):  # type: ignore[arg-type]
                row = rows.popleft()
                row[j] = text
                writer.writerow([row[k] for k in written])
        return st
    records: deque[dict] = deque()
    if column in drop_columns or column in keep_columns:
        raise ValidationError(f"{path}: field {column!r} is released; it cannot also be kept or dropped")
    dropped, others = set(drop_columns), set[str]()
    # a field holding the released text under another name is refused before a line is written
    scan_file(path, None, LeakRule.text(str(column)), exclude=[*keep_columns, *drop_columns], max_record=max_record)

    def fields() -> Iterator[str]:
        for n, line in enumerate(_decoded_lines(path, max_record), start=1):
            read[0] += len(line)
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as ex:
                raise ValidationError(f"{path}: line {n} is not JSON ({ex.msg})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get(column), str):
                raise ValidationError(f"{path}: line {n} has no string field {column!r}")
            if accounting is not None:  # before a dropped field goes: the author may be dropped from the output
                accounting.add_record(rec, f"{path}: line {n}")
            for key in dropped.intersection(rec):
                del rec[key]
            others.update(k for k in rec if k != column)
            records.append(rec)
            yield rec[column]

    for text in rewrite_texts(fields(), vocabulary, sample, **kw):  # type: ignore[arg-type]
        rec = records.popleft()
        rec[column] = text
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    # JSONL has no header: the fields that left with true values are those seen in the records
    kept = set(keep_columns)
    st.columns = ColumnPlan(
        header=(str(column), *sorted(others | dropped)), released=(str(column),), kept=tuple(sorted(others & kept)),
        unacknowledged=tuple(sorted(others - kept)), dropped=tuple(sorted(dropped)),
    )
    return st
