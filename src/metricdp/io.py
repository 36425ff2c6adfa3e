"""Files: POINTS files in, atomic writes out.

Mechanism files are written by :meth:`metricdp.mechanisms.base.Mechanism.save` and read
by :func:`metricdp.mechanisms.file.load_mechanism` (beside :class:`Mechanism`, so this
module imports nothing of the mechanisms).
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import hashlib
import io
import os
import secrets
import shutil
import signal
import socket
import stat
import tempfile
import threading
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._resources import check_allocation
from .errors import UnsafeOutputError, ValidationError
from .outputs import OutputSet
from .spaces import METRICS, MetricSpace

__all__ = [
    "TEMP_SUFFIX", "atomic_write", "check_npy_header", "check_output_path", "clean_stale_temporaries",
    "read_csv_table", "read_output_distances", "read_output_points", "read_point_columns", "read_points",
    "scratch_directory",
]



_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)

#: Suffix of every name :func:`atomic_write` gives a file before publishing it. The full
#: name is ``.TARGET.PID@HOST.TOKEN`` + this suffix, so a later run can tell whose it was.
TEMP_SUFFIX = ".metricdp-tmp"
_HOST = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_NAME_MAX = 120  # characters of the target's name kept in a temporary name (NAME_MAX is 255 bytes)


class _Signalled(BaseException):
    """SIGINT/SIGTERM arrived inside :func:`atomic_write`: unwind, clean up, then re-deliver."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def check_output_path(target: Path, inputs: Iterable[str | PathLike[str] | None]) -> Path:
    """The real path to write (symlinks followed), or :class:`UnsafeOutputError`.

    Refused: a ``target`` that exists and is not a regular file (a directory, a device, a
    FIFO, a socket), a missing directory, and a ``target`` that is one of ``inputs`` by
    any name -- the same resolved path, or the same file (device and inode: a hard link,
    or a symlink to it). ``None`` items of ``inputs`` are skipped, so a command passes
    its optional inputs as they are. An input that does not exist is compared by
    resolved path only (nothing exists to clobber, and its reader will refuse it).
    """
    real = Path(os.path.realpath(target))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a regular file")
        raise UnsafeOutputError(f"refusing to write {target}: it is {kind}, not a regular file")
    if not real.parent.is_dir():
        raise UnsafeOutputError(f"cannot write {target}: directory {target.parent} does not exist")
    for item in inputs:
        if item is None:
            continue
        src = Path(item)
        try:
            same = st is not None and _identity(os.stat(src)) == _identity(st)  # hard links and symlinks alike
        except (FileNotFoundError, NotADirectoryError):
            same = False
        except OSError:  # unreadable metadata: fall back on the path
            same = False
        if same or os.path.realpath(src) == str(real):
            raise UnsafeOutputError(
                f"refusing to write {target}: it is the input file {src} "
                "(an output that is also an input would be destroyed)"
            )
    return real


def _input_identities(inputs: Iterable[str | PathLike[str] | None]) -> set[tuple[int, int]]:
    found = set()
    for item in inputs:
        if item is not None:
            with contextlib.suppress(OSError):
                found.add(_identity(os.stat(item)))
    return found


def _temp_prefix(real: Path) -> str:
    return f".{real.name[:_NAME_MAX]}."


def _temp_name(real: Path) -> Path:
    """A fresh hidden name beside ``real`` that says which process on which host made it."""
    return real.parent / f"{_temp_prefix(real)}{os.getpid()}@{_HOST}.{secrets.token_hex(6)}{TEMP_SUFFIX}"


def scratch_directory(near: str | PathLike[str]) -> Path:
    """A new hidden directory beside ``near`` (same file system), named like
    :func:`atomic_write`'s temporaries (``.NAME.PID@HOST.XXXX.metricdp-tmp``), so that if
    the process is killed before removing it, the next write to ``near`` removes it
    (:func:`clean_stale_temporaries`). The engines write their part files there."""
    real = Path(os.path.realpath(near))
    prefix = f"{_temp_prefix(real)}{os.getpid()}@{_HOST}."
    return Path(tempfile.mkdtemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=real.parent))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clean_stale_temporaries(real: Path) -> list[Path]:
    """Remove the hidden names a killed :func:`atomic_write` into ``real`` may have left.

    A name is stale when the process in it (``PID@HOST``) ran on this host and is no
    longer alive. A live process's name, another host's (a shared file system) and every
    file not named by the pattern are left alone. Returns what was removed. Called at the
    start of every :func:`atomic_write`, so the next write to a target cleans up after a
    ``kill -9`` of the previous one.
    """
    removed: list[Path] = []
    prefix = _temp_prefix(real)
    try:
        names = os.listdir(real.parent)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(prefix) and name.endswith(TEMP_SUFFIX)):
            continue
        owner = name[len(prefix):-len(TEMP_SUFFIX)].rsplit(".", 1)[0]
        pid_text, _, host = owner.partition("@")
        if host != _HOST or not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        path = real.parent / name
        with contextlib.suppress(FileNotFoundError):
            if path.is_dir() and not path.is_symlink():  # an engine's scratch directory
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
    return removed


def _open_unnamed(directory: Path) -> int:
    """An unnamed file in ``directory`` (Linux ``O_TMPFILE``) that can be linked by
    ``/proc/self/fd``; -1 where the platform, the file system or ``/proc`` lacks it."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return -1
    try:
        fd = os.open(directory, flag | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o666)  # the umask applies
    except OSError:  # EOPNOTSUPP (file system), EISDIR/EINVAL (old kernel), EACCES
        return -1
    if not os.path.exists(f"/proc/self/fd/{fd}"):  # no /proc: it could never be linked
        os.close(fd)
        return -1
    return fd


def _link_unnamed(fd: int, name: Path) -> None:
    """Give the unnamed file ``fd`` the name ``name``: ``linkat(AT_SYMLINK_FOLLOW)`` of
    ``/proc/self/fd/N`` (a directory descriptor makes Python call ``linkat``, not ``link``,
    which would link the ``/proc`` symlink itself and fail with EXDEV)."""
    dir_fd = os.open(name.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.link(f"/proc/self/fd/{fd}", name.name, dst_dir_fd=dir_fd, follow_symlinks=True)
    finally:
        os.close(dir_fd)


def _copy_fd(fd: int, name: Path) -> None:
    """Copy the whole of ``fd`` into a new file ``name`` (mode from the umask), fsynced."""
    umask = os.umask(0)
    os.umask(umask)
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666 & ~umask)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        with os.fdopen(os.dup(fd), "rb", closefd=True) as src, os.fdopen(out, "wb", closefd=False) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.fsync(out)
    finally:
        os.close(out)


@contextlib.contextmanager
def atomic_write(
    path: str | PathLike[str], mode: str = "wb", *, inputs: Iterable[str | PathLike[str] | None] = ()
) -> Iterator[IO[Any]]:
    """Write a file that appears whole at ``path`` on success and never in part.

    Refused with :class:`~metricdp.errors.UnsafeOutputError` before anything is written
    (:func:`check_output_path`): a ``path`` that exists and is not a regular file (a
    directory, a device such as ``/dev/null``, a FIFO, a socket), a ``path`` that is
    (after symlinks, or as a hard link) one of ``inputs`` -- the files the same command
    reads -- and a directory that does not exist. A symlink is written through: its
    target is replaced, the link kept. The output gets the permissions the umask gives
    a new file.

    How nothing partial survives, ``kill -9`` included:

    * Linux: the data go to an *unnamed* file (``O_TMPFILE``) in the target's directory,
      which the kernel frees however the process dies. At the end it is fsynced and given
      a name with ``link("/proc/self/fd/N")``: straight to ``path`` when ``path`` does not
      exist (one atomic step; it fails rather than overwrite if ``path`` appeared), else
      to a hidden name ``.NAME.PID@HOST.TOKEN.metricdp-tmp`` then ``os.replace``-d onto
      ``path``. Only a ``kill -9`` between those two system calls can leave the hidden
      name, and what it leaves is the *complete* output, never a partial one.
    * Elsewhere (no ``O_TMPFILE``, or a file system without it): the data go to a file
      under such a hidden name from the start, renamed onto ``path`` at the end.

    Either way the hidden name holds its owner's process id and host, and
    :func:`clean_stale_temporaries` (run at the start of every write to the same target)
    removes those of dead processes on this host. On any exception, and on SIGINT or
    SIGTERM (handlers installed for the duration when called from the main thread, the
    previous ones restored and the signal re-delivered after the clean-up), the file is
    removed and ``path`` is left untouched.
    """
    target = Path(path)
    inputs = [p for p in inputs if p is not None]
    real = check_output_path(target, inputs)
    protected = _input_identities(inputs)
    clean_stale_temporaries(real)
    previous: dict[int, Any] = {}
    fd, keep, tmp = -1, -1, None

    def _on_signal(signum: int, _frame: Any) -> None:
        raise _Signalled(signum)

    try:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is not signal.SIG_IGN:  # an ignored signal stays ignored
                    previous[signum] = signal.signal(signum, _on_signal)
        fd = _open_unnamed(real.parent)
        if fd < 0:
            tmp = _temp_name(real)
            umask = os.umask(0)
            os.umask(umask)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666 & ~umask)
        keep = os.dup(fd)  # ours: the body may close its file object (some writers do)
        text: dict[str, Any] = {} if "b" in mode else {"newline": "", "encoding": "utf-8"}
        with os.fdopen(fd, mode, **text) as fh:
            fd = -1  # owned (and closed) by fh from here
            yield fh
        os.fsync(keep)
        with contextlib.suppress(FileNotFoundError):
            if _identity(os.stat(real)) in protected:  # swapped for an input while we wrote
                raise UnsafeOutputError(f"refusing to write {target}: it is now one of the inputs")
        if tmp is None:
            try:
                _link_unnamed(keep, real)  # a new name: one atomic step
            except FileExistsError:
                tmp = _temp_name(real)
                _link_unnamed(keep, tmp)
                os.replace(tmp, real)
            except OSError:  # a file system that made the unnamed file but cannot link it
                tmp = _temp_name(real)
                _copy_fd(keep, tmp)
                os.replace(tmp, real)
        else:
            os.replace(tmp, real)
        tmp = None
    except BaseException as ex:
        for open_fd in (fd, keep):
            if open_fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(open_fd)
        keep = -1
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _restore(previous)
        if isinstance(ex, _Signalled):
            signal.raise_signal(ex.signum)  # the previous handler decides (default: terminate)
            if ex.signum == signal.SIGINT:
                raise KeyboardInterrupt from None
            raise SystemExit(128 + ex.signum) from None
        raise
    finally:
        if keep >= 0:
            os.close(keep)
        _restore(previous)


def _restore(previous: dict[int, Any]) -> None:
    """Put back the signal handlers :func:`atomic_write` replaced (once)."""
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
    previous.clear()


#: What numpy raises on a malformed .npy header (it parses the header as a Python literal).
NPY_HEADER_ERRORS = (ValueError, SyntaxError, TypeError, KeyError, EOFError, OSError, tokenize.TokenError)


def check_npy_header(fh: IO[bytes], what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Read and vet a .npy header before numpy allocates anything: (shape, dtype).

    Refuses (ValidationError naming ``what``) a malformed header, an object dtype (which
    would need pickle) and a declared size over the memory limit
    (:func:`metricdp._resources.check_allocation`); a hostile header can declare any shape.
    """
    try:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _fortran, dtype = read(fh)
    except NPY_HEADER_ERRORS as ex:
        raise ValidationError(f"{what} is not a .npy array ({type(ex).__name__}: {ex})") from None
    if dtype.hasobject:
        raise ValidationError(f"{what} holds Python objects; refused (no pickle)")
    check_allocation(float(np.prod(shape, dtype=np.float64)) * max(dtype.itemsize, 1), f"{what} of shape {shape}")
    return shape, dtype


def read_points(path: str | PathLike[str], metric: str | None = None) -> MetricSpace:
    """Read a POINTS file into a :class:`MetricSpace`.

    * ``.npy``: a precomputed distance matrix (all metric axioms checked);
    * ``.csv`` / ``.parquet``: first column ``label``, other columns coordinates; with
      ``metric="haversine"`` (the default when the columns are ``lat``, ``lon``) they
      are latitude and longitude in degrees and distances are in km.
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            with p.open("rb") as fh:
                check_npy_header(fh, str(p))
                fh.seek(0)
                d = np.load(fh, allow_pickle=False)
        except NPY_HEADER_ERRORS as ex:
            raise ValidationError(f"{p}: not a readable .npy distance matrix ({type(ex).__name__}: {ex})") from None
        if metric not in (None, "precomputed"):
            raise ValidationError(f"{p}: a .npy distance matrix takes no --metric (got {metric!r})")
        try:
            return MetricSpace.from_distances(d)
        except ValidationError as ex:
            raise ValidationError(f"{p}: {ex}") from None
    if suffix == ".csv":
        header, labels, coords = _read_csv(p)
    elif suffix in (".parquet", ".pq"):
        header, labels, coords = _read_parquet(p)
    else:
        raise ValidationError(f"{p}: POINTS must be .csv, .parquet or .npy, got {suffix or 'no extension'}")
    if header[0].strip().lower() != "label":
        raise ValidationError(f"{p}: the first column must be 'label', got {header[0]!r}")
    if len(header) < 2:
        raise ValidationError(f"{p}: needs at least one coordinate column after 'label'")
    cols = [h.strip().lower() for h in header[1:]]
    if metric is None:
        metric = "haversine" if cols == ["lat", "lon"] else "euclidean"
    if metric not in METRICS:
        raise ValidationError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if metric == "haversine" and cols != ["lat", "lon"]:
        raise ValidationError(f"{p}: haversine needs the columns label,lat,lon; got {','.join(header)}")
    try:
        return MetricSpace.from_points(coords, labels, metric)
    except ValidationError as ex:
        raise ValidationError(f"{p}: {ex}") from None


def read_point_columns(path: str | PathLike[str]) -> list[str] | None:
    """The coordinate columns (after ``label``, stripped, lower case) of a ``.csv`` / ``.parquet``
    POINTS file already read by :func:`read_points`; None for a ``.npy`` distance matrix."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        with p.open(encoding="utf-8-sig", newline="") as fh:
            header = next(csv.reader(fh), [])
    elif suffix in (".parquet", ".pq"):
        from ._optional import import_optional

        header = list(import_optional("pyarrow.parquet", extra="parquet").read_schema(p).names)
    else:
        return None
    return [h.strip().lower() for h in header[1:]]


def read_output_points(
    path: str | PathLike[str], space: MetricSpace, *, columns: Sequence[str] | None = None
) -> OutputSet:
    """A separate output set from a POINTS file (``.csv`` / ``.parquet``, as :func:`read_points`),
    measured with ``space``'s own metric (the space must have coordinates).

    ``build --outputs POINTS``: a coarse release grid, points of interest. ``columns``, the
    space's coordinate columns (:func:`read_point_columns`), when given must equal the
    file's: outputs in ``lat,lon`` are not measured as the ``x,y`` of a Euclidean space,
    nor ``y,x`` as ``x,y``.
    """
    p = Path(path)
    if space.points is None or space.metric not in METRICS:
        raise ValidationError(f"--outputs {p}: output points need a space of points under a coordinate metric; "
                              f"this space's metric is {space.metric!r} (give --output-distances instead)")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        header, labels, coords = _read_csv(p)
    elif suffix in (".parquet", ".pq"):
        header, labels, coords = _read_parquet(p)
    else:
        raise ValidationError(f"--outputs {p}: output points must be a .csv or .parquet POINTS file")
    cols = [h.strip().lower() for h in header[1:]]
    if header[0].strip().lower() != "label" or not cols:
        raise ValidationError(f"--outputs {p}: the columns must be label then coordinates, got {','.join(header)}")
    if space.metric == "haversine" and cols != ["lat", "lon"]:
        raise ValidationError(f"--outputs {p}: the space is haversine, so the columns must be label,lat,lon")
    if columns is not None and cols != [c.strip().lower() for c in columns]:
        raise ValidationError(f"--outputs {p}: the coordinate columns are {','.join(cols)}, but the space's POINTS "
                              f"has {','.join(columns)}: outputs must be points of the same coordinates and metric")
    try:
        return OutputSet.from_points(space, coords, labels)
    except ValidationError as ex:
        raise ValidationError(f"--outputs {p}: {ex}") from None


def read_output_distances(path: str | PathLike[str], space: MetricSpace) -> OutputSet:
    """A separate output set from its distances to the inputs, a CSV file.

    Format (``build --output-distances FILE``): the header row is ``label`` then the
    output labels; then one row per input: its label, then its distance to every output.
    Every input label of ``space`` appears exactly once (in any order).
    """
    p = Path(path)
    if p.suffix.lower() != ".csv":
        raise ValidationError(f"--output-distances {p}: expected a .csv file (label, then one column per output)")
    header, rows, lines = read_csv_table(p)
    if header[0].strip().lower() != "label" or len(header) < 2:
        raise ValidationError(f"--output-distances {p}: the header must be 'label' then the output labels")
    order: dict[str, int] = {}
    values = np.empty((len(rows), len(header) - 1))
    for k, (row, line) in enumerate(zip(rows, lines, strict=True)):
        if row[0] in order:
            raise ValidationError(f"--output-distances {p}: input {row[0]!r} appears twice (line {line})")
        order[row[0]] = k
        try:
            values[k] = [_decimal(x) for x in row[1:]]
        except ValueError:
            raise ValidationError(f"--output-distances {p}: line {line} has a non-numeric distance") from None
    missing = [lab for lab in space.labels if lab not in order]
    known = set(space.labels)
    extra = [lab for lab in order if lab not in known]
    if missing or extra:
        what = f"lacks input(s) {missing[:5]}" if missing else f"names input(s) not in the space: {extra[:5]}"
        raise ValidationError(f"--output-distances {p}: {what}")
    cross = values[[order[lab] for lab in space.labels]]
    try:
        return OutputSet.from_distances(space, cross, [h.strip() for h in header[1:]])
    except ValidationError as ex:
        raise ValidationError(f"--output-distances {p}: {ex}") from None


def read_csv_table(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, rows and each row's line number of a small CSV file read whole.

    UTF-8 with an optional byte-order mark; invalid bytes, an empty file and ragged rows are
    one :class:`ValidationError` naming the file and the byte offset or line. Blank lines are
    skipped. (``privatize`` streams instead: :mod:`metricdp.streaming`.)
    """
    if not path.is_file():
        raise ValidationError(f"{path}: no such file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as ex:
        at = ex.start + (3 if raw.startswith(codecs.BOM_UTF8) else 0)
        raise ValidationError(f"{path}: not UTF-8 text (invalid byte 0x{raw[at]:02x} at byte offset {at})") from None
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            if header is None:
                raise ValidationError(f"{path}: empty file (no header row)")
            rows, lines = [], []
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise ValidationError(
                        f"{path}: line {reader.line_num} has {len(row)} fields, expected {len(header)}"
                    )
                rows.append(row)
                lines.append(reader.line_num)
        except csv.Error as ex:  # a field over csv.field_size_limit(), a NUL byte
            raise ValidationError(f"{path}: line {reader.line_num} is not valid CSV ({ex})") from None
    return header, rows, lines


def _decimal(text: str) -> float:
    """``float(text)`` of a plain ASCII number: Python's float() also reads ``1_000`` and
    non-ASCII digits (``'\\u0661'`` is 1.0), which a data file never means (a ValueError)."""
    if "_" in text or not text.isascii():
        raise ValueError(f"not a plain decimal number: {text!r}")
    return float(text)


def _read_csv(p: Path) -> tuple[list[str], list[str], np.ndarray]:
    header, rows, lines = read_csv_table(p)
    coords = []
    for row, line_no in zip(rows, lines, strict=True):
        try:
            coords.append([_decimal(x) for x in row[1:]])
        except ValueError:
            raise ValidationError(f"{p}: line {line_no} has a non-numeric coordinate: {row[1:]}") from None
    if not rows:
        raise ValidationError(f"{p}: no points")
    return header, [row[0] for row in rows], np.asarray(coords, dtype=np.float64)


def _read_parquet(p: Path) -> tuple[list[str], list[str], np.ndarray]:
    from ._optional import import_optional

    pq = import_optional("pyarrow.parquet", extra="parquet")
    try:
        table = pq.read_table(p)
    except Exception as ex:  # pyarrow raises several unrelated types for bad files
        raise ValidationError(f"{p}: not a readable Parquet file ({ex})") from None
    header = table.column_names
    raw = table.column(0).to_pylist()
    if None in raw:
        raise ValidationError(f"{p}: the label of row {raw.index(None)} is null; every point needs a label")
    labels = [str(x) for x in raw]
    pa = import_optional("pyarrow", extra="parquet")
    for c in header[1:]:  # numbers only: numpy would run float() on strings ('1_0' is 10.0)
        kind = table.schema.field(c).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
            raise ValidationError(f"{p}: coordinate column {c!r} has type {kind}; coordinates must be numbers")
    try:
        coords = np.column_stack([np.asarray(table.column(c).to_numpy(), dtype=np.float64) for c in header[1:]])
    except (ValueError, TypeError) as ex:
        raise ValidationError(f"{p}: coordinates must be numeric ({ex})") from None
    return header, labels, coords
