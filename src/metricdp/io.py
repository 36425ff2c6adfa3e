"""Files: POINTS files in, mechanism files in and out, atomic writes.

Mechanism file
--------------
One ``.npz`` readable with ``numpy.load(path, allow_pickle=False)`` and no metricdp
installed, holding

* ``matrix`` -- float64 (n, n), row-stochastic;
* ``distances`` -- float64 (n, n);
* ``labels`` -- unicode strings (n,);
* ``metadata`` -- a 0-d unicode array of JSON with at least ``mechanism``, ``epsilon``,
  ``params``, ``metricdp_version`` (and ``lp`` when an LP was solved);
* optionally ``points`` -- float64 (n, dim), the coordinates, which true samplers of
  continuous mechanisms (Madlib, planar Laplace) need.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
import threading
import zipfile
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._validation import check_metric, check_stochastic
from .errors import MechanismFileError, UnsafeOutputError, ValidationError
from .spaces import METRICS, MetricSpace

__all__ = ["atomic_write", "load_mechanism", "read_points", "save_mechanism"]

_REQUIRED = ("matrix", "distances", "labels", "metadata")
_TRIANGLE_CHECK_MAX_N = 2000


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


class _Signalled(BaseException):
    """SIGINT/SIGTERM arrived inside :func:`atomic_write`: unwind, clean up, then re-deliver."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _check_output_path(target: Path, inputs: Iterable[str | PathLike[str]]) -> Path:
    """The real path to write (symlinks followed), or :class:`UnsafeOutputError`."""
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
        src = Path(item)
        same = False
        if st is not None and src.exists():
            same = os.path.samefile(src, real)  # hard links and symlinks alike
        elif os.path.realpath(src) == str(real):
            same = True
        if same:
            raise UnsafeOutputError(f"refusing to write {target}: it is the input {src}")
    return real


@contextlib.contextmanager
def atomic_write(
    path: str | PathLike[str], mode: str = "wb", *, inputs: Iterable[str | PathLike[str]] = ()
) -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    Refused with :class:`~metricdp.errors.UnsafeOutputError` before anything is written:
    a ``path`` that exists and is not a regular file (a directory, a device such as
    ``/dev/null``, a FIFO, a socket), a ``path`` that is (after symlinks, or as a hard
    link) one of ``inputs`` -- the files the same command reads -- and a directory that
    does not exist. A symlink is written through: its target is replaced, the link kept.

    On any exception, and on SIGINT or SIGTERM (handlers installed for the duration when
    called from the main thread, the previous ones restored and the signal re-delivered
    after the clean-up), the temporary file is removed and ``path`` is left untouched,
    so a failed or interrupted command never leaves a half-written output. The output
    gets the permissions the umask gives a new file.
    """
    target = Path(path)
    real = _check_output_path(target, inputs)
    previous: dict[int, Any] = {}
    fd, tmp = -1, None

    def _on_signal(signum: int, _frame: Any) -> None:
        raise _Signalled(signum)

    try:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is not signal.SIG_IGN:  # an ignored signal stays ignored
                    previous[signum] = signal.signal(signum, _on_signal)
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual permissions
        with os.fdopen(fd, mode, **({} if "b" in mode else {"newline": "", "encoding": "utf-8"})) as fh:
            fd = -1  # owned (and closed) by fh from here
            yield fh
        os.replace(tmp, real)
    except BaseException as ex:
        if fd >= 0:
            os.close(fd)
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
        _restore(previous)


def _restore(previous: dict[int, Any]) -> None:
    """Put back the signal handlers :func:`atomic_write` replaced (once)."""
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
    previous.clear()


def save_mechanism(mechanism: Any, path: str | PathLike[str]) -> None:
    """Write ``mechanism`` as a mechanism file (atomically)."""
    arrays: dict[str, np.ndarray] = {
        "matrix": np.asarray(mechanism.matrix, dtype=np.float64),
        "distances": np.asarray(mechanism.space.distances, dtype=np.float64),
        "labels": np.array(mechanism.labels, dtype=str),
        "metadata": np.array(json.dumps(_jsonable(mechanism.metadata))),
    }
    if mechanism.space.points is not None:
        arrays["points"] = np.asarray(mechanism.space.points, dtype=np.float64)
    with atomic_write(path) as fh:
        np.savez(fh, **arrays)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict | os.PathLike) or hasattr(obj, "items"):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)
    return obj


def load_mechanism(path: str | PathLike[str], *, verify: bool = True) -> Any:
    """Read and check a mechanism file; any defect is a :class:`MechanismFileError`.

    With ``verify`` (the default), an exact mechanism's matrix is audited again
    (:func:`metricdp.audit.audit`) and a file whose matrix is not ``epsilon``-mDP (within
    the builders' 1e-9 relative slack) is refused: the claim in a file is not trusted.
    Estimated (Monte-Carlo) mechanisms are not audited: their releases come from the true
    sampler, not from the matrix.
    """
    from .mechanisms.base import Mechanism

    p = Path(path)
    if not p.is_file():
        raise MechanismFileError(f"{p}: no such file")
    try:
        # Open the file ourselves: np.load leaks its handle when a zip is truncated, returns a
        # bare array (no context manager) for a .npy, and tries pickle on anything else.
        with p.open("rb") as fh:
            if not zipfile.is_zipfile(fh):
                raise MechanismFileError(f"{p}: not a mechanism file (not an .npz archive)")
            fh.seek(0)
            with np.load(fh, allow_pickle=False) as z:
                missing = [k for k in _REQUIRED if k not in z.files]
                if missing:
                    raise MechanismFileError(f"{p}: not a mechanism file (missing {', '.join(missing)})")
                arrays = {k: z[k] for k in z.files}
    except MechanismFileError:
        raise
    except ValueError as ex:  # object arrays need pickle: refused
        raise MechanismFileError(f"{p}: not a mechanism file ({ex})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as ex:
        raise MechanismFileError(f"{p}: not a readable .npz mechanism file ({type(ex).__name__}: {ex})") from None
    try:
        meta = json.loads(str(arrays["metadata"]))
    except (json.JSONDecodeError, TypeError):
        raise MechanismFileError(f"{p}: metadata is not JSON") from None
    if not isinstance(meta, dict) or not {"mechanism", "epsilon", "params"} <= meta.keys():
        raise MechanismFileError(f"{p}: metadata lacks mechanism, epsilon or params")
    labels = arrays["labels"]
    if labels.ndim != 1 or labels.dtype.kind != "U":
        raise MechanismFileError(f"{p}: labels must be a 1-d string array")
    n = len(labels)
    for key in ("matrix", "distances"):
        if arrays[key].shape != (n, n):
            raise MechanismFileError(f"{p}: {key} has shape {arrays[key].shape}, expected ({n}, {n}) for {n} labels")
    try:
        matrix = check_stochastic(arrays["matrix"], name="matrix")
        d = check_metric(arrays["distances"], labels=list(labels), triangle=n <= _TRIANGLE_CHECK_MAX_N)
    except ValidationError as ex:
        raise MechanismFileError(f"{p}: {ex}") from None
    points = arrays.get("points")
    space_meta = meta.get("space") or {}
    metric = str(space_meta.get("metric", "precomputed"))
    if points is not None and (points.ndim != 2 or points.shape[0] != n):
        raise MechanismFileError(f"{p}: points has shape {points.shape}, expected ({n}, dim)")
    if points is not None:
        points = points.astype(np.float64)
        points.setflags(write=False)
    d.setflags(write=False)
    cell = space_meta.get("cell")
    space = MetricSpace(d, tuple(str(x) for x in labels), metric, points, float(cell) if cell else None)
    import metricdp.mechanisms  # noqa: F401  (registers the true samplers)

    reserved = ("mechanism", "epsilon", "params", "metricdp_version", "exact", "space")
    info = {k: v for k, v in meta.items() if k not in reserved}
    try:
        mechanism = Mechanism(matrix, space, float(meta["epsilon"]), str(meta["mechanism"]), meta["params"], info,
                              exact=bool(meta.get("exact", True)))
    except (TypeError, ValueError) as ex:
        raise MechanismFileError(f"{p}: metadata does not describe a mechanism ({ex})") from None
    if verify and mechanism.exact:
        from .mechanisms.base import AUDIT_RTOL

        result = mechanism.audit()
        if not result.satisfies(mechanism.epsilon, AUDIT_RTOL):
            raise MechanismFileError(
                f"{p}: claims epsilon={mechanism.epsilon!r} but its matrix is only {result.epsilon!r}-mDP "
                f"(triple u, v, w = {result.witness}); refusing to use it"
            )
    return mechanism


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
            d = np.load(p, allow_pickle=False)
        except (ValueError, OSError) as ex:
            raise ValidationError(f"{p}: not a readable .npy distance matrix ({ex})") from None
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


def _read_csv(p: Path) -> tuple[list[str], list[str], np.ndarray]:
    import csv

    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise ValidationError(f"{p}: empty file") from None
        labels, rows = [], []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValidationError(f"{p}: line {line_no} has {len(row)} fields, expected {len(header)}")
            labels.append(row[0])
            try:
                rows.append([float(x) for x in row[1:]])
            except ValueError:
                raise ValidationError(f"{p}: line {line_no} has a non-numeric coordinate: {row[1:]}") from None
    if not rows:
        raise ValidationError(f"{p}: no points")
    return header, labels, np.asarray(rows, dtype=np.float64)


def _read_parquet(p: Path) -> tuple[list[str], list[str], np.ndarray]:
    from ._optional import import_optional

    pq = import_optional("pyarrow.parquet", extra="parquet")
    try:
        table = pq.read_table(p)
    except Exception as ex:  # pyarrow raises several unrelated types for bad files
        raise ValidationError(f"{p}: not a readable Parquet file ({ex})") from None
    header = table.column_names
    labels = [str(x) for x in table.column(0).to_pylist()]
    try:
        coords = np.column_stack([np.asarray(table.column(c).to_numpy(), dtype=np.float64) for c in header[1:]])
    except (ValueError, TypeError) as ex:
        raise ValidationError(f"{p}: coordinates must be numeric ({ex})") from None
    return header, labels, coords
