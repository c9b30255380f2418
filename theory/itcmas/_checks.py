"""Input checks shared by the ITCMA-S modules (one-line TypeError/ValueError before any work)."""

from __future__ import annotations

import numbers

import numpy as np


# ================================================================== input checks
def _real(x, name: str) -> np.ndarray:
    """``x`` as a float64 array of finite real numbers (bool, complex, str, object rejected)."""
    a = np.asarray(x)
    if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"{name} must be real numbers (int or float); got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _scalar(x, name: str, *, low: float | None = None, high: float | None = None) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(x).__name__} {x!r}")
    x = float(x)
    if not np.isfinite(x):
        raise ValueError(f"{name} must be finite; got {x}")
    if low is not None and x < low:
        raise ValueError(f"{name} must be >= {low}; got {x}")
    if high is not None and x > high:
        raise ValueError(f"{name} must be <= {high}; got {x}")
    return x


def _int(x, name: str, *, low: int | None = None) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {type(x).__name__} {x!r}")
    x = int(x)
    if low is not None and x < low:
        raise ValueError(f"{name} must be >= {low}; got {x}")
    return x


def _in_unit(a: np.ndarray, name: str) -> np.ndarray:
    if a.size and (a.min() < -1.0 or a.max() > 1.0):
        raise ValueError(f"{name} must lie in [-1, 1] (an emotion value); got values in [{a.min():.6g}, {a.max():.6g}]")
    return a


def _out(a):
    """0-d arrays become numpy scalars; arrays are returned as is."""
    return a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a


def _broadcast(*arrays_names):
    arrays = [a for a, _ in arrays_names]
    try:
        return np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(f"{n} {a.shape}" for a, n in arrays_names)
        raise ValueError(f"shapes do not broadcast together: {shapes}") from None


def _sigmoid(x):
    # 0.5 (1 + tanh(x / 2)) is the logistic function, exact and overflow-free.
    return 0.5 * (1.0 + np.tanh(0.5 * x))
