"""The one place normlab imports Numba: every kernel module of every layer takes ``njit``/``prange`` from here.

Numba's own start-up imports ``scipy.linalg.cython_blas`` only to learn whether SciPy's BLAS is
there (``numba.np.arraymath._HAVE_BLAS``), which loads all of ``scipy.linalg``: 0.15-0.2 s of
the ~0.6 s that ``import normlab.theory`` plus a first call from the cache costs, for kernels
that use no BLAS. Before Numba is first imported we put a stand-in module under that name, which
answers the presence check and turns into the real module on first attribute access (Numba's
``np.dot``/``np.linalg`` kernels and Cython's C-API imports both read ``__pyx_capi__`` from it,
so they get the real functions). Nothing is deferred when SciPy is absent, when Numba is already
imported, or with ``NORMLAB_EAGER_BLAS=1``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

_BLAS = "scipy.linalg.cython_blas"


class _DeferredModule(types.ModuleType):
    """Stands in for a module until one of its attributes is read, then imports the real one."""

    def __getattr__(self, attr):
        if attr.startswith("__") and attr in ("__path__", "__file__", "__spec__", "__loader__"):
            raise AttributeError(attr)
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def _defer_scipy_blas() -> bool:
    if "numba" in sys.modules or _BLAS in sys.modules or os.environ.get("NORMLAB_EAGER_BLAS") == "1":
        return False
    if importlib.util.find_spec("scipy") is None:
        return False
    sys.modules[_BLAS] = _DeferredModule(_BLAS)
    return True


_defer_scipy_blas()

from numba import njit, prange  # noqa: E402

__all__ = ["njit", "prange"]
