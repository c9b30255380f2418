"""Alias of :mod:`normlab._jit` (the one import of Numba) for callers outside theory until they import it
from there (``calibration/posterior.py``, ``benchmarks/bench_theory.py``). Theory's kernels use
``normlab._jit`` directly."""

from __future__ import annotations

from normlab._jit import njit, prange  # noqa: F401

__all__ = ["njit", "prange"]
