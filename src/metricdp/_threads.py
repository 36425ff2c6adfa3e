"""One bound on the BLAS thread pools, for every kernel that calls BLAS in a loop.

On a shared machine a BLAS that spins one thread per core for small products costs many
times the CPU of one thread for the same result; the LP solver, the text search and IBU
run their products under :func:`blas_threads` (threadpoolctl, a core dependency: see
pyproject.toml).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["blas_threads"]


@contextlib.contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Limit the BLAS thread pools to ``limit`` threads inside the block (restored after)."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped,unused-ignore]

    with threadpool_limits(limits=limit, user_api="blas"):
        yield
