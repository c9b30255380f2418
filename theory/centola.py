"""Mean-field critical mass of the memory-M best-response game (Centola et al. 2018).

Uncommitted agents play the name seen most often among partners' last ``M`` plays (ties at
random); a fraction ``C`` is committed to the new name. The probability ``r`` that a random
partner plays the new name obeys ``r = C + (1 − C) Φ_M(r)`` with
``Φ_M(r) = P[Bin(M, r) > M/2] + ½ P[Bin(M, r) = M/2]``; the old convention survives while the
lower fixed point exists, and the critical mass ``C*_M`` is its fold.

References
----------
D. Centola, J. Becker, D. Brackbill, A. Baronchelli, Science 360, 1116 (2018), Supplementary
Materials (mean-field model); values for M = 3..20 in VALIDATION.md of this project.
"""

from __future__ import annotations

import numpy as np

from normlab._validate import check_int


def majority_probability(r, memory: int):
    """``Φ_M(r)``: probability that a best responder with memory ``M`` plays the new name.

    Parameters
    ----------
    r : float or numpy.ndarray
        Probability that a partner plays the new name.
    memory : int
        Memory length ``M``.

    Returns
    -------
    float or numpy.ndarray
    """
    from scipy.stats import binom

    M = check_int(memory, "memory", low=1)
    r = np.asarray(r, dtype=float)
    k = np.arange(M + 1)
    pmf = binom.pmf(k[:, None], M, r.reshape(1, -1))
    w = np.where(2 * k > M, 1.0, np.where(2 * k == M, 0.5, 0.0))
    out = (w[:, None] * pmf).sum(axis=0)
    return out.reshape(r.shape) if r.ndim else float(out[0])


def centola_critical_mass(memory: int) -> float:
    """Mean-field critical mass ``C*_M``: the largest committed fraction keeping the old convention.

    Along the lower fixed-point branch ``C(r) = (r − Φ_M(r)) / (1 − Φ_M(r))``; ``C*_M`` is its
    maximum over ``r`` in (0, 1/2) (the saddle-node fold).

    Parameters
    ----------
    memory : int
        Memory length ``M`` (>= 2; with ``M = 1`` best response has no fold).

    Returns
    -------
    float
        E.g. 0.111 for M = 3 or 4, 0.165 for M = 5 or 6.

    References
    ----------
    Implements the mean-field model of Centola et al., Science 360, 1116 (2018).
    """
    from scipy.optimize import minimize_scalar

    M = check_int(memory, "memory", low=2)
    f = lambda r: -(r - majority_probability(r, M)) / (1.0 - majority_probability(r, M))
    grid = np.linspace(1e-4, 0.5 - 1e-4, 2001)
    vals = np.array([f(x) for x in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return float(-res.fun)
