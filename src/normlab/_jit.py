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
import itertools
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


def _cap_numba_threads() -> None:
    """Numba's ``prange`` kernels start ``os.cpu_count()`` threads unless told otherwise; under a
    CPU set or a cgroup quota smaller than the machine they wait on each other at every step. Set
    before Numba is first imported, never over a user's ``NUMBA_NUM_THREADS``."""
    if "numba" in sys.modules or "NUMBA_NUM_THREADS" in os.environ:
        return
    from normlab._cores import available_cores

    n = available_cores()
    if n < (os.cpu_count() or n):
        os.environ["NUMBA_NUM_THREADS"] = str(n)


_cap_numba_threads()

from numba import njit, prange  # noqa: E402

__all__ = ["kernel_variant", "njit", "prange"]

# Names given to variants so far (a name given twice would share symbols and cache files).
_VARIANT_NAMES: set = set()
_USER_VARIANTS = itertools.count(1)


def kernel_variant(fn, name: str | None = None, *, cache: bool = True, parallel: bool = False, **globals_):
    """A kernel compiled from ``fn``'s code with some of its globals replaced, as a function of
    its own: the one way normlab builds kernel variants.

    Numba names the machine code of a function by its qualified name and a per-process counter,
    and a cached library keeps the counters of the process that compiled it. A variant compiled
    under its source's name can therefore take the place of the source's cached code (or the
    reverse) in a process whose cache is warm: a user's strategy kernel answered for the built-in
    one. Each variant gets its own name -- its own symbols and, with ``cache=True``, its own cache
    files.

    Parameters
    ----------
    fn : function
        The pure-Python source of a kernel (its ``_py`` twin).
    name : str, optional
        The variant's name, unique in the process (a cached variant needs a fixed one, the same in
        every process). ``None``: an uncached variant named after ``fn`` with a counter.
    cache : bool
        Compile with Numba's on-disk cache (needs a fixed ``name``; a variant holding a user's
        function is never cached).
    parallel : bool
        Compile with ``parallel=True``.
    **globals_
        The globals replaced (functions, constants: Numba compiles globals as constants).
    """
    if name is None:
        if cache:
            raise ValueError("a cached kernel variant needs a fixed name")
        name = f"{fn.__name__}__variant{next(_USER_VARIANTS)}"
    if name == fn.__name__ or name in _VARIANT_NAMES:
        raise ValueError(f"kernel variant name {name!r} is taken; each variant needs a name of its own")
    _VARIANT_NAMES.add(name)
    g = dict(fn.__globals__)
    g.update(globals_)
    out = types.FunctionType(fn.__code__, g, name, fn.__defaults__, fn.__closure__)
    out.__qualname__ = name
    out.__doc__ = fn.__doc__
    out.__module__ = fn.__module__
    return njit(cache=cache, parallel=parallel)(out)
