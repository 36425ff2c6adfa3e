"""Memory estimates before allocation: refuse with the size and the limit, never a MemoryError later.

The one memory guard of metricdp. The limit is ``METRICDP_MEMORY_LIMIT`` from the
environment -- plain bytes (``1000000``) or a number with a unit (``8GiB``, ``100MiB``,
``2GB``, ``500kB``; decimal units are powers of 1000, binary ones of 1024, case ignored)
-- else :data:`SAFETY_FRACTION` of the memory this process can really get (:func:`available_memory`):
the smallest of the machine's physical memory, the address-space limit ``RLIMIT_AS``
and the memory limit of the process's cgroup (v2 ``memory.max`` or v1
``memory.limit_in_bytes``, of its own group and every ancestor's). A container with
4 GB on a 256 GB host gets a limit from its 4 GB, not from the host.

Builders, spaces, file readers and samplers call :func:`check_allocation` with their
estimate before allocating anything sized by their input (dense n x n arrays, sample
blocks, arrays declared by a file header).

>>> format_bytes(9.6e9), format_bytes(100 * 2**20), format_bytes(2.5e13)
('9.6 GB', '105 MB', '25 TB')
>>> parse_bytes("1.5GiB") == 1.5 * 2**30
True
>>> parse_bytes("100MiB"), parse_bytes("2GB"), parse_bytes("4096")
(104857600.0, 2000000000.0, 4096.0)
"""

from __future__ import annotations

import functools
import math
import os
import re
from pathlib import Path

from .errors import ResourceLimitError, ValidationError

__all__ = [
    "ENV_VAR", "SAFETY_FRACTION", "available_memory", "cgroup_limit", "check_allocation", "format_bytes",
    "memory_limit", "parse_bytes", "usable_cpus",
]

ENV_VAR = "METRICDP_MEMORY_LIMIT"
#: The default limit as a fraction of :func:`available_memory`. A plan that
#: :func:`check_allocation` accepts is one array (or one group of arrays) of the
#: estimated size; at its peak a builder also holds one temporary of about the same size
#: (the distances and their ``exp(-eps d)``, a matrix and its row-normalised copy) besides
#: the interpreter, numpy and the smaller arrays alive. Half the memory leaves room for
#: exactly that pair, so an accepted plan does not meet the OOM killer; a user who knows
#: better sets the variable.
SAFETY_FRACTION = 0.5
_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "k": 2**10, "kib": 2**10, "m": 2**20,
          "mib": 2**20, "g": 2**30, "gib": 2**30, "t": 2**40, "tib": 2**40}
_FALLBACK = 8e9  # no way to ask the machine (no sysconf): 8 GB, then halved
_UNLIMITED_CGROUP = 2**62  # v1 writes 9223372036854771712 (a page-aligned 2**63 - 1) for "no limit"


def parse_bytes(text: str) -> float:
    """``"8GiB"`` -> bytes; one ValidationError naming the variable and the text otherwise.

    A number (integer, decimal or exponent) then an optional unit: B, kB/MB/GB/TB (powers of
    1000), KiB/MiB/GiB/TiB or K/M/G/T (powers of 1024); case and spaces ignored.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValidationError(f"{ENV_VAR} must be a size such as 8GiB, 100MiB, 2GB or a number of bytes, got {text!r}")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not (math.isfinite(value) and value >= 1):
        raise ValidationError(f"{ENV_VAR} must be a positive size of at least 1 byte, got {text!r}")
    return value


def format_bytes(n: float) -> str:
    """Bytes in decimal units, 2 significant digits below 100 (``9.6 GB``, ``105 MB``)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.2g} {unit}"
    return f"{n:.0f} B"


def _read_limit(path: Path) -> float | None:
    """A cgroup limit file's value in bytes; None for ``max``, "unlimited", absent or unreadable."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit():  # v2 "max"
        return None
    value = float(text)
    return None if value >= _UNLIMITED_CGROUP else value


def cgroup_limit(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The smallest memory limit of this process's cgroup and its ancestors, or None.

    v2: the ``0::PATH`` line of ``/proc/self/cgroup`` and ``ROOT/PATH/memory.max``; v1: the
    ``N:...memory...:PATH`` line and ``ROOT/memory/PATH/memory.limit_in_bytes``. Each
    directory from the group up to the mount point is read (a parent's limit binds its
    children), and so is the mount point itself, which is the group inside a container
    whose cgroup namespace makes its own group the root.
    """
    try:
        lines = proc_cgroup.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, group = parts[1].split(","), parts[2].strip()
        if parts[0] == "0" and parts[1] == "":
            base, name = root, "memory.max"  # v2 unified hierarchy
            if not (root / "cgroup.controllers").exists():
                base = root / "unified"  # hybrid mode: v2 mounted beside the v1 controllers
        elif "memory" in controllers:
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        rel = Path(group.lstrip("/"))
        for directory in (base / rel, *(base / p for p in rel.parents)):
            value = _read_limit(directory / name)
            if value is not None:
                found.append(value)
    return min(found) if found else None


def _rlimit_as() -> float | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else float(soft)


def _physical() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        return None


@functools.lru_cache(maxsize=1)
def available_memory() -> float:
    """Bytes this process can get at most: min(physical memory, RLIMIT_AS, cgroup limit).

    Read once per process (a few files under ``/proc`` and ``/sys``: milliseconds, and
    :func:`check_allocation` runs once per block of some loops); ``available_memory.cache_clear()``
    reads them again.
    """
    known = [v for v in (_physical(), _rlimit_as(), cgroup_limit()) if v is not None]
    return min(known) if known else _FALLBACK


def memory_limit() -> float:
    """Bytes any one allocation plan may need: ``METRICDP_MEMORY_LIMIT`` when set, else
    :data:`SAFETY_FRACTION` of :func:`available_memory` (see the module docstring)."""
    text = os.environ.get(ENV_VAR)
    if text is not None and text.strip():
        return parse_bytes(text)
    return SAFETY_FRACTION * available_memory()


def usable_cpus() -> int:
    """The processors this process may run on (its affinity where the OS has one, else the count): at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


#: Threads of the vectorised scans over matrices (the audit's, the metric check's, the repair's):
#: numpy releases the GIL in them, and beyond 4 the memory bandwidth, not the cores, bounds them.
SCAN_THREADS = 4


def scan_threads() -> int:
    """Threads for one vectorised scan: :data:`SCAN_THREADS`, or fewer where fewer processors are usable."""
    return min(SCAN_THREADS, usable_cpus())


def check_allocation(nbytes: float, what: str) -> None:
    """Refuse (ResourceLimitError) a plan of ``nbytes`` over the limit; ``what`` says what needs it."""
    limit = memory_limit()
    if not nbytes <= limit:  # NaN (an overflowed estimate) is refused too
        raise ResourceLimitError(
            f"{what} need {format_bytes(nbytes)}; the limit is {format_bytes(limit)} "
            f"(set {ENV_VAR} to change it, e.g. {ENV_VAR}=8GiB)"
        )
