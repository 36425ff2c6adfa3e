"""``njit``: numba's decorator with an on-disk cache where one can be written, or None without numba.

The one loader of numba for the compiled kernels (:mod:`metricdp.mechanisms._lattice_kernels`,
:mod:`metricdp.lp._ipm_kernels`, :mod:`metricdp._ibu_kernels`,
:mod:`metricdp.streaming._person_kernels`, :mod:`metricdp.accounting._hmac_kernels`): importing this
module imports numba, so it is imported only by those modules, which are themselves loaded on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["njit"]

njit: Any
try:  # pragma: no cover - exercised when numba is installed
    import numba

    def njit(**options: Any) -> Any:
        def wrap(fn: Any) -> Any:
            try:
                return numba.njit(**options)(fn)
            except RuntimeError:  # no cache locator
                return numba.njit(**{**options, "cache": False})(fn)

        return wrap

except ImportError:  # pragma: no cover
    njit = None
