"""The small statistics every layer shares (a leaf module: NumPy, SciPy on first use, nothing of normlab).

- :func:`clopper_pearson` -- exact binomial confidence interval (flip probabilities, probe accuracies).
- :func:`first_reaching` and :func:`interval_crossing` -- where a curve over swept values first
  reaches a level: at a swept value, or by linear interpolation between two swept values (the
  50% point of a flip curve, the width of a basin).
- :func:`smallest_count` -- the smallest tested committed count whose flag is set.
- :func:`firth_logistic` -- Firth-penalised logistic regression on grouped binomial data (the
  ``per_run`` 50% point of a flip curve).

What a search that finds nothing returns ("not reached") is part of each function's contract:
``inf`` from :func:`smallest_count` (a count beyond every tested one, as
:mod:`normlab.theory.criteria` reports it), ``NaN`` from :func:`first_reaching` and
:func:`interval_crossing` (a position on the curve that does not exist, as
:func:`normlab.theory.sweeps.locate_critical_mass` reports it).

References
----------
C. J. Clopper, E. S. Pearson, Biometrika 26, 404 (1934); D. Firth, Biometrika 80, 27 (1993).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["clopper_pearson", "first_reaching", "interval_crossing", "smallest_count", "firth_logistic"]


def clopper_pearson(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper–Pearson) two-sided confidence interval for a binomial proportion, vectorised.

    Parameters
    ----------
    k, n : int or array_like
        Successes and trials.
    alpha : float, optional
        1 - confidence (0.05: a 95% interval).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Lower and upper bounds; NaN where ``n <= 0``.
    """
    from scipy.stats import beta

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(alpha / 2, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    bad = n <= 0
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def first_reaching(x, y, level: float) -> float:
    """The first ``x`` (in the given order) whose ``y`` is ``>= level``; NaN if none."""
    x = np.asarray(x, dtype=float)
    idx = np.flatnonzero(np.asarray(y) >= level)
    return float(x[idx[0]]) if idx.size else float("nan")


def interval_crossing(x, y, level: float = 0.5) -> float:
    """Where the piecewise-linear curve ``y(x)`` first reaches ``level``.

    ``x[0]`` if the curve starts at or above ``level``; NaN if it never reaches it.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    idx = np.flatnonzero(y >= level)
    if not idx.size:
        return float("nan")
    k = idx[0]
    if k == 0:
        return float(x[0])
    y0, y1 = y[k - 1], y[k]
    return float(x[k - 1] + (level - y0) / (y1 - y0) * (x[k] - x[k - 1]))


def smallest_count(counts, ok) -> float:
    """Smallest tested count whose flag is true (``inf`` when none)."""
    c = np.asarray(counts, dtype=float)
    o = np.asarray(ok, dtype=bool)
    if c.shape != o.shape:
        raise ValueError(f"counts and flags differ in shape: {c.shape} vs {o.shape}")
    return float(c[o].min()) if o.any() else math.inf


def firth_logistic(x, k, n, *, max_iter: int = 100, tol: float = 1e-10):
    """Firth-penalised logistic regression ``logit P = b0 + b1 x`` on grouped binomial data.

    Parameters
    ----------
    x, k, n : array_like
        Covariate, successes and trials per group.
    max_iter : int, optional
    tol : float, optional
        Stop when no coefficient moves by more than this.

    Returns
    -------
    numpy.ndarray
        ``[b0, b1]``.

    References
    ----------
    D. Firth, "Bias reduction of maximum likelihood estimates", Biometrika 80, 27 (1993).
    """
    x, k, n = (np.asarray(v, float) for v in (x, k, n))
    X = np.column_stack([np.ones_like(x), x])
    b = np.zeros(2)
    for _ in range(max_iter):
        p = 1 / (1 + np.exp(-(X @ b)))
        w = n * p * (1 - p)
        info = X.T @ (X * w[:, None])
        try:
            inv = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            inv = np.linalg.pinv(info)
        h = w * np.einsum("ij,jk,ik->i", X, inv, X)
        U = X.T @ (k - n * p + h * (0.5 - p))
        step = inv @ U
        m = np.max(np.abs(step))
        if m > 5:  # damping keeps the iteration stable under separation
            step *= 5 / m
        b = b + step
        if np.max(np.abs(step)) < tol:
            break
    return b
