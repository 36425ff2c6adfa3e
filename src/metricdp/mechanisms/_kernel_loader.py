"""Load the compiled lattice kernels on first use, so that no command imports numba before it needs them.

Importing numba is slow and would weigh on every CLI start (``metricdp --help`` included), and
most commands never run a lattice kernel. Each module that uses the kernels holds
``_KERNELS = LAZY`` and asks :func:`lattice_kernels` for them at the point of use; the
first call imports :mod:`metricdp.mechanisms._lattice_kernels` (and numba, when it is
installed). A module whose ``_KERNELS`` was set to ``None`` (tests compare the compiled
kernels with the numpy reference that way) keeps numpy.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["LAZY", "lattice_kernels"]

#: The value of a module's ``_KERNELS`` until its first use: "load them then".
LAZY: Final = "lazy"


def lattice_kernels(current: Any = LAZY) -> Any:
    """The kernels dict (None without numba), or ``current`` when a module set it (None: numpy)."""
    if current is not LAZY:
        return current
    from ._lattice_kernels import KERNELS

    return KERNELS
