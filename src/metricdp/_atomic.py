"""Output files that appear whole or not at all, and never over an input.

:func:`atomic_write` is the one way metricdp writes a file (every CLI command, the
streaming writer, the engines, :meth:`~metricdp.mechanisms.base.Mechanism.save`), and
:func:`check_output_path` the one check of an output path (the CLI makes it early, through
:func:`metricdp.cli._common.check_output`, before any long computation). The contract:

* the output is a regular file or a new name -- never a device, FIFO, socket or directory;
* it is none of the command's inputs, by any name (resolved path, symlink, hard link);
* it appears atomically, complete, or not at all: no failure leaves a partial file,
  ``kill -9`` included (:func:`atomic_write`'s docstring says how).

Re-exported by :mod:`metricdp.io`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import socket
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import IO, Any

from .errors import UnsafeOutputError

__all__ = [
    "TEMP_SUFFIX", "atomic_write", "check_output_path", "clean_stale_temporaries", "scratch_directory",
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


def check_output_path(
    target: Path, inputs: Iterable[str | PathLike[str] | None], *, replace: bool = True
) -> Path:
    """The real path to write (symlinks followed), or :class:`UnsafeOutputError`.

    Refused: a ``target`` that exists and is not a regular file (a directory, a device, a
    FIFO, a socket), a missing directory, and a ``target`` that is one of ``inputs`` by
    any name -- the same resolved path, or the same file (device and inode: a hard link,
    or a symlink to it). ``None`` items of ``inputs`` are skipped, so a command passes
    its optional inputs as they are. An input that does not exist is compared by
    resolved path only (nothing exists to clobber, and its reader will refuse it).
    With ``replace=False`` a ``target`` that exists at all (a dangling symlink included)
    is refused too, after those checks: the caller did not ask to replace a file.
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
        except OSError:  # absent or unreadable: the resolved path decides
            same = False
        if same or os.path.realpath(src) == str(real):
            raise UnsafeOutputError(
                f"refusing to write {target}: it is the input file {src} "
                "(an output that is also an input would be destroyed)"
            )
    if not replace and os.path.lexists(target):
        raise UnsafeOutputError(f"refusing to write {target}: the file exists and replacing it was not asked for")
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


def _appeared(target: Path) -> UnsafeOutputError:
    """The refusal of a name that appeared while a write that may not replace it was under way."""
    return UnsafeOutputError(f"refusing to write {target}: the file appeared while it was written")


def _publish(tmp: Path, real: Path, target: Path, replace: bool) -> None:
    """Give the complete hidden file ``tmp`` its name ``real``: ``os.replace``, or with
    ``replace=False`` a ``link`` (which fails on an existing name) and the hidden name's removal."""
    if replace:
        os.replace(tmp, real)
        return
    try:
        os.link(tmp, real)
    except FileExistsError:
        raise _appeared(target) from None
    os.unlink(tmp)


@contextlib.contextmanager
def atomic_write(
    path: str | PathLike[str], mode: str = "wb", *, inputs: Iterable[str | PathLike[str] | None] = (),
    replace: bool = True,
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

    With ``replace=False`` an existing ``path`` is never replaced: it is refused before
    anything is written, and if it appears while the data are written the last step (a
    ``link``, which fails on an existing name, instead of ``os.replace``) refuses it too,
    removing the hidden name.

    Either way the hidden name holds its owner's process id and host, and
    :func:`clean_stale_temporaries` (run at the start of every write to the same target)
    removes those of dead processes on this host. On any exception, and on SIGINT or
    SIGTERM (handlers installed for the duration when called from the main thread, the
    previous ones restored and the signal re-delivered after the clean-up), the file is
    removed and ``path`` is left untouched.
    """
    target = Path(path)
    inputs = [p for p in inputs if p is not None]
    real = check_output_path(target, inputs, replace=replace)
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
                if not replace:
                    raise _appeared(target) from None
                tmp = _temp_name(real)
                _link_unnamed(keep, tmp)
                os.replace(tmp, real)
            except OSError:  # a file system that made the unnamed file but cannot link it
                tmp = _temp_name(real)
                _copy_fd(keep, tmp)
                _publish(tmp, real, target, replace)
        else:
            _publish(tmp, real, target, replace)
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
