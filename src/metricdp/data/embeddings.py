"""Word embeddings: an immutable word -> vector table and streaming file readers.

Formats
-------
* **GloVe text** -- one word per line followed by its ``dim`` values, separated by
  single spaces, no header (``glove.6B.50d.txt``).
* **FastText / word2vec text** (``.vec``) -- the same lines after a header line
  ``"<count> <dim>"`` (``wiki-news-300d-1M.vec``, ``cc.en.300.vec``).
* **word2vec binary** (``GoogleNews-vectors-negative300.bin``) -- an ASCII header line
  ``"<count> <dim>\\n"``, then per word its UTF-8 bytes, one space, and ``dim``
  little-endian float32 values (some writers add a newline after each vector).

Both readers stream: they allocate the ``(rows, dim)`` array once (rows from a fast
newline count of the file or from the header) and parse one line or record at a time
into it, so a 2 GB file costs the array plus one Python string per word kept, never a
Python float per value. ``limit`` stops after the first ``limit`` words of the file
(files are sorted by frequency, so this keeps the most frequent words) and
``vocabulary`` keeps only the listed words (in file order) and stops reading as soon as
all of them were found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from .._resources import check_allocation
from .._validation import check_int
from ..errors import ValidationError
from ..spaces import MetricSpace

__all__ = ["Embeddings", "read_vec", "read_word2vec_binary"]

_CHUNK = 1 << 22  # bytes per read when counting lines or scanning binary records
_MAX_WORD_BYTES = 1 << 16  # a longer "word" means the file is not word2vec binary
_BATCH = 4096  # text lines handed to numpy's parser at once


@dataclass(frozen=True, eq=False, repr=False)
class Embeddings:
    """Unique words and their vectors, row ``i`` of ``vectors`` belonging to ``words[i]``.

    Attributes
    ----------
    words : tuple of str
        Unique words, in file order (for GloVe and FastText: by decreasing frequency).
    vectors : ndarray of shape (n, dim)
        float32 or float64, read-only (a read-only memory map for :func:`~metricdp.data.load_glove`).
    """

    words: tuple[str, ...]
    vectors: NDArray[np.floating]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        v = self.vectors
        if not isinstance(v, np.ndarray):
            v = np.asarray(v)
        if v.ndim != 2 or not np.issubdtype(v.dtype, np.floating):
            raise ValidationError(f"vectors must be a 2-d float array, got {v.dtype} of shape {v.shape}")
        words = tuple(self.words)
        if len(words) != v.shape[0]:
            raise ValidationError(f"{len(words)} words for {v.shape[0]} vectors")
        index: dict[str, int] = {}
        for i, w in enumerate(words):
            if index.setdefault(w, i) != i:
                raise ValidationError(
                    f"word {w!r} appears twice (rows {index[w]} and {i}); words must be unique"
                )
        if v.flags.writeable:
            v = v.view()
            v.setflags(write=False)
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "vectors", v)
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def dim(self) -> int:
        """Dimension of the vectors."""
        return int(self.vectors.shape[1])

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def index(self, words: str | Iterable[str]) -> NDArray[np.intp]:
        """Row indices of ``words``; the error names every word that is missing."""
        items = [words] if isinstance(words, str) else list(words)
        missing = [w for w in items if w not in self._index]
        if missing:
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            shown = ", ".join(repr(w) for w in missing[:10]) + more
            raise ValidationError(f"{len(missing)} word(s) not in the embeddings: {shown}")
        return np.array([self._index[w] for w in items], dtype=np.intp)

    def subset(self, indices: ArrayLike) -> Embeddings:
        """The embeddings of the given rows (copied, in the given order)."""
        idx = np.asarray(indices, dtype=np.intp)
        if idx.ndim != 1:
            raise ValidationError(f"indices must be 1-d, got shape {idx.shape}")
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise ValidationError(f"indices must lie in 0..{len(self) - 1}")
        return Embeddings(tuple(self.words[i] for i in idx), np.array(self.vectors[idx]))

    def space(self, indices: ArrayLike | None = None, metric: str = "euclidean") -> MetricSpace:
        """The metric space of (some of) the words: coordinates = vectors (as float64), labels = words.

        Raises :class:`~metricdp.errors.ValidationError` naming a pair of words with
        identical vectors (a zero distance is not a metric).
        """
        idx = np.arange(len(self)) if indices is None else np.asarray(indices, dtype=np.intp)
        return MetricSpace.from_points(
            np.asarray(self.vectors[idx], dtype=np.float64), [self.words[i] for i in idx], metric
        )

    @cached_property
    def _cached_repr(self) -> str:
        head = ", ".join(repr(w) for w in self.words[:3])
        return f"Embeddings(n={len(self)}, dim={self.dim}, dtype={self.vectors.dtype}, words=[{head}, ...])"

    def __repr__(self) -> str:
        return self._cached_repr


# ------------------------------------------------------------------------------ helpers
def _path(path: str | PathLike[str]) -> Path:
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    return p


def _count_lines(p: Path) -> int:
    """Number of lines (a last line without a newline counts), in fixed-size binary reads."""
    count, last = 0, b"\n"
    with p.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _options(
    limit: int | None, vocabulary: Iterable[str] | None
) -> tuple[int | None, frozenset[str] | None]:
    lim = None if limit is None else check_int(limit, "limit", minimum=1)
    if vocabulary is None:
        return lim, None
    if isinstance(vocabulary, str):
        raise ValidationError("vocabulary must be a collection of words, not one string")
    vocab = frozenset(str(w) for w in vocabulary)
    if not vocab:
        raise ValidationError("vocabulary is empty")
    return lim, vocab


def _header(text: str) -> tuple[int, int] | None:
    """``(count, dim)`` when ``text`` is a word2vec/FastText header line, else None."""
    parts = text.split()
    if len(parts) == 2 and all(x.isdigit() for x in parts):
        return int(parts[0]), int(parts[1])
    return None


def _finish(
    p: Path, words: list[str], vectors: NDArray[np.floating], where: list[int], unit: str, filtered: bool
) -> Embeddings:
    k = len(words)
    if k == 0:
        why = " (none of the vocabulary is in the file)" if filtered else ""
        raise ValidationError(f"{p}: no word read{why}")
    out = vectors[:k] if k == len(vectors) else vectors[:k].copy()
    for start in range(0, k, 1 << 16):  # in blocks: no (k, dim) boolean temporary
        finite = np.isfinite(out[start : start + (1 << 16)]).all(axis=1)
        if not finite.all():
            i = start + int(np.flatnonzero(~finite)[0])
            raise ValidationError(f"{p}: {unit} {where[i]} ({words[i]!r}) has a non-finite value")
    return Embeddings(tuple(words), out)


# ------------------------------------------------------------------------------ text
def read_vec(
    path: str | PathLike[str],
    *,
    limit: int | None = None,
    vocabulary: Iterable[str] | None = None,
    dtype: DTypeLike = np.float32,
    unicode_errors: str = "strict",
) -> Embeddings:
    """Read a GloVe (no header) or FastText ``.vec`` (``count dim`` header) text file.

    Parameters
    ----------
    path : path-like
        The text file (UTF-8).
    limit : int, optional
        Read at most the first ``limit`` words of the file.
    vocabulary : iterable of str, optional
        Keep only these words (in file order); reading stops once all were found.
        Words not in the file are simply absent from the result.
    dtype : float dtype
        Dtype of the vectors (float32, the precision of the published files, by default).
    unicode_errors : str
        How to decode invalid UTF-8 (``"strict"`` raises naming the line; ``"replace"``
        and ``"ignore"`` as in :meth:`bytes.decode`).

    Returns
    -------
    Embeddings

    Notes
    -----
    A first line of exactly two integers is the header. The dimension comes from the
    header, or else from the first line (whose word must not contain a space). A
    line's last ``dim`` space-separated fields are its vector and everything before
    them is the word, so the few words containing spaces in GloVe 840B load. When a
    word appears more than once, its first (most frequent) vector is kept. Errors name
    the file and the line: too few values, a value that is not a number, a non-finite
    value, invalid UTF-8, or a header whose count does not match the number of lines.
    """
    p = _path(path)
    lim, vocab = _options(limit, vocabulary)
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.floating):
        raise ValidationError(f"dtype must be a float dtype, got {dt}")
    lines = _count_lines(p)
    size = p.stat().st_size
    if lines == 0:
        raise ValidationError(f"{p}: empty file")
    words: list[str] = []
    where: list[int] = []
    seen: set[str] = set()
    with p.open("rb") as fh:
        first = fh.readline()
        try:
            head = _header(first.decode("utf-8", unicode_errors))
        except UnicodeDecodeError:
            raise ValidationError(f"{p}: line 1 is not valid UTF-8") from None
        if head is not None:
            announced, dim = head
            if dim < 1:
                raise ValidationError(f"{p}: line 1: the header announces dimension {dim}")
            # a value takes at least 2 bytes ("0 "): a larger dim is a header that lies,
            # refused before (lines - 1) x dim values are allocated for it
            if 2 * dim > size:
                raise ValidationError(
                    f"{p}: line 1: the header announces dimension {dim}, more values per line than the "
                    f"file's {size} bytes can hold"
                )
            rows, line_no, pending = lines - 1, 1, None
        else:
            announced = None
            dim = len(first.decode("utf-8", unicode_errors).split()) - 1
            if dim < 1:
                raise ValidationError(
                    f"{p}: line 1 has no vector (expected a word and its values, or a 'count dim' header)"
                )
            rows, line_no, pending = lines, 0, first
        capacity = rows if lim is None else min(rows, lim)
        if vocab is not None:
            capacity = min(capacity, len(vocab))
        check_allocation(float(capacity) * dim * dt.itemsize, f"{p}: {capacity} x {dim} vectors")
        vectors = np.empty((capacity, dim), dtype=dt)
        scanned = 0
        batch: list[str] = []  # vector text of kept lines, parsed _BATCH lines at a time
        while True:
            raw = pending if pending is not None else fh.readline()
            pending = None
            if not raw:
                break
            line_no += 1
            if not raw.strip():
                continue  # blank (e.g. trailing) lines
            if lim is not None and scanned >= lim:
                break
            scanned += 1
            try:
                text = raw.decode("utf-8", unicode_errors).rstrip()
            except UnicodeDecodeError:
                raise ValidationError(f"{p}: line {line_no} is not valid UTF-8") from None
            spaces = text.count(" ")
            if spaces == dim:  # the usual line: a word without spaces, then dim values
                word, _, rest = text.partition(" ")
            elif spaces > dim:  # the last dim fields are the vector, the rest is the word
                word = text.rsplit(" ", dim)[0]
                rest = text[len(word) + 1 :]
            else:
                raise ValidationError(f"{p}: line {line_no} has {spaces} values after the word, expected {dim}")
            if not word:
                raise ValidationError(f"{p}: line {line_no} has an empty word")
            if word in seen or (vocab is not None and word not in vocab):
                continue
            seen.add(word)
            words.append(word)
            where.append(line_no)
            batch.append(rest)
            if len(batch) == _BATCH:
                _parse_rows(p, batch, vectors[len(words) - len(batch) : len(words)], where[-len(batch) :])
                batch.clear()
            if len(words) == capacity and (vocab is not None or lim is not None):
                break
        if batch:
            _parse_rows(p, batch, vectors[len(words) - len(batch) : len(words)], where[-len(batch) :])
        complete = lim is None and vocab is None
        if announced is not None and complete and scanned != announced:
            raise ValidationError(f"{p}: the header announces {announced} words but the file has {scanned}")
    return _finish(p, words, vectors, where, "line", vocab is not None)


def _parse_rows(p: Path, texts: list[str], out: NDArray[np.floating], lines: list[int]) -> None:
    """Parse lines of ``dim`` space-separated numbers into ``out`` (numpy's C parser).

    Values are read as float64 and then cast to ``out``'s dtype, as ``float()`` would.
    Only when the batch does not parse is it re-read line by line, to name the line.
    """
    try:
        values = np.loadtxt(texts, dtype=np.float64, comments=None, ndmin=2)
    except ValueError:
        values = None
    if values is not None and values.shape == out.shape:
        out[...] = values
        return
    for text, line, row in zip(texts, lines, out, strict=True):
        fields = text.split(" ")
        if len(fields) != out.shape[1]:
            raise ValidationError(f"{p}: line {line} has {len(fields)} values after the word, expected {out.shape[1]}")
        try:
            row[...] = [float(x) for x in fields]
        except ValueError:
            bad = next(x for x in fields if not _is_float(x))
            raise ValidationError(f"{p}: line {line}: {bad!r} is not a number") from None


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ binary
class _ByteReader:
    """Buffered reads of delimited and fixed-size fields from a binary stream."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._buf = b""
        self._pos = 0
        self.offset = 0  # bytes consumed so far

    def _more(self) -> bool:
        chunk = self._fh.read(_CHUNK)
        if not chunk:
            return False
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def skip(self, chars: bytes) -> None:
        """Consume any run of the given bytes."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in chars:
                self._pos += 1
                self.offset += 1
            if self._pos < len(self._buf) or not self._more():
                return

    def until(self, sep: bytes) -> bytes | None:
        """Bytes up to (not including) ``sep``, which is consumed; None at end of file."""
        while True:
            i = self._buf.find(sep, self._pos)
            if i >= 0:
                out = self._buf[self._pos : i]
                self.offset += i + 1 - self._pos
                self._pos = i + 1
                return out
            if len(self._buf) - self._pos > _MAX_WORD_BYTES or not self._more():
                return None

    def exact(self, size: int) -> bytes | None:
        """Exactly ``size`` bytes; None when the file ends first."""
        while len(self._buf) - self._pos < size:
            if not self._more():
                return None
        out = self._buf[self._pos : self._pos + size]
        self._pos += size
        self.offset += size
        return out

    def at_end(self) -> bool:
        return self._pos >= len(self._buf) and not self._more()


def read_word2vec_binary(
    path: str | PathLike[str],
    *,
    limit: int | None = None,
    vocabulary: Iterable[str] | None = None,
    dtype: DTypeLike = np.float32,
    unicode_errors: str = "strict",
) -> Embeddings:
    """Read a word2vec binary file (``"count dim"`` header, then word + float32 records).

    Parameters are those of :func:`read_vec`. Records are read in 4 MB blocks; each
    vector is decoded with :func:`numpy.frombuffer` (little-endian float32). Errors name
    the record (1-based) and its byte offset: a truncated record, a word without its
    terminating space, invalid UTF-8, a non-finite value, or fewer records than the
    header announces.
    """
    p = _path(path)
    lim, vocab = _options(limit, vocabulary)
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.floating):
        raise ValidationError(f"dtype must be a float dtype, got {dt}")
    words: list[str] = []
    where: list[int] = []
    seen: set[str] = set()
    with p.open("rb") as fh:
        first = fh.readline(256)
        try:
            head = _header(first.decode("ascii"))
        except UnicodeDecodeError:
            head = None
        if head is None or not first.endswith(b"\n"):
            raise ValidationError(f"{p}: not a word2vec binary file (line 1 must be 'count dim')")
        announced, dim = head
        if dim < 1 or announced < 1:
            raise ValidationError(f"{p}: line 1: the header announces {announced} words of dimension {dim}")
        # a record is at least a 1-byte word, a space and 4 * dim bytes, so the file holds at
        # most body // (4 dim + 2) records: the allocation follows the file, not the header
        body = p.stat().st_size - len(first)
        fits = body // (4 * dim + 2)
        if fits == 0:
            raise ValidationError(
                f"{p}: line 1: the header announces dimension {dim}, but the file's {body} bytes of records "
                "cannot hold one vector of that dimension"
            )
        capacity = min(announced, fits) if lim is None else min(announced, fits, lim)
        if vocab is not None:
            capacity = min(capacity, len(vocab))
        check_allocation(float(capacity) * dim * dt.itemsize, f"{p}: {capacity} x {dim} vectors")
        vectors = np.empty((capacity, dim), dtype=dt)
        reader = _ByteReader(fh)
        reader.offset = len(first)
        width = 4 * dim
        total = announced if lim is None else min(announced, lim)
        for record in range(1, total + 1):
            reader.skip(b"\n")
            start = reader.offset
            raw = reader.until(b" ")
            if raw is None:
                if reader.at_end():
                    raise ValidationError(
                        f"{p}: the header announces {announced} words but the file ends after {record - 1}"
                    )
                raise ValidationError(f"{p}: record {record} at byte {start}: no space after the word")
            data = reader.exact(width)
            if data is None:
                raise ValidationError(f"{p}: record {record} at byte {start} is truncated")
            try:
                word = raw.decode("utf-8", unicode_errors)
            except UnicodeDecodeError:
                raise ValidationError(
                    f"{p}: record {record} at byte {start}: the word is not valid UTF-8"
                ) from None
            if not word:
                raise ValidationError(f"{p}: record {record} at byte {start} has an empty word")
            if word in seen or (vocab is not None and word not in vocab):
                continue
            vectors[len(words)] = np.frombuffer(data, dtype="<f4")
            seen.add(word)
            words.append(word)
            where.append(record)
            if len(words) == capacity and vocab is not None:
                break
    return _finish(p, words, vectors, where, "record", vocab is not None)
