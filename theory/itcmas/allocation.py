"""ITCMA-S Eq. 19: rank-based, zero-sum resource allocation; ranks from an ordered answer; Gini.

References
----------
X. Zhang, X. Yin, N. Jiang, S. Su (Zhang et al.), "Can Agents Spontaneously Form a Society?
Introducing a Novel Architecture for Generative Multi-Agents to Elicit Social Emergence"
(ITCMA-S), arXiv:2409.06750 (2024): Sect. 4.2.2 (Eq. 19).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ._checks import _int, _out, _real, _scalar


# ================================================================== Eq. 19: rank-based allocation
def _check_range(s_min, s_max):
    lo = _scalar(s_min, "s_min", low=0.0)
    hi = _scalar(s_max, "s_max", low=0.0)
    if lo > hi:
        raise ValueError(f"s_min must be <= s_max; got s_min={lo}, s_max={hi}")
    return lo, hi


def _allocation_table(n: int, lo: float, hi: float) -> np.ndarray:
    j = np.arange(1, n + 1, dtype=np.float64)
    half = n / 2.0
    scale = (hi - lo) / abs(half - 1.0)
    upper = lo + np.abs(j - half) * scale
    lower = -(lo + np.abs(j - half - 1.0) * scale)
    out = np.where(j <= half, upper, lower)
    if n % 2 == 1:
        out[(n + 1) // 2 - 1] = 0.0
    return out


def allocate_resources(n: int, s_min: float, s_max: float) -> np.ndarray:
    """Resources received by the ``j``-th ranked of ``n`` agents (rank 1 first).

    ``S'_j = s_min + |j - n/2| (s_max - s_min) / |n/2 - 1|`` for ``j <= n/2``;
    ``S'_j = 0`` for ``j = (n + 1)/2`` (odd ``n``);
    ``S'_j = -(s_min + |j - n/2 - 1| (s_max - s_min) / |n/2 - 1|)`` for ``j > n/2``.

    Rank 1 receives ``s_max``; receipts fall linearly towards ``s_min`` at ``j = n/2``; the
    lower half loses the mirror amounts, so the vector is antisymmetric (``S'_j = -S'_{n+1-j}``)
    and sums to zero. For odd ``n``, ``n/2`` is not a rank: the last positive rank
    ``(n - 1)/2`` receives ``s_min + (s_max - s_min) / (n - 2)``, not ``s_min``, and the middle
    rank receives 0 (the literal formula; e.g. ``n = 5``: ``[5, 2.33, 0, -2.33, -5]`` for
    ``s_min = 1, s_max = 5``).

    Parameters
    ----------
    n : int
        Number of ranked agents, ``n >= 3``.
    s_min, s_max : float
        Smallest and largest amount a receiving agent gets, ``0 <= s_min <= s_max``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``, float64; entry ``j - 1`` is ``S'_j``. Non-increasing in ``j``.

    Raises
    ------
    ValueError
        If ``n <= 2``: the paper defines Eq. 19 only "for n > 2 agents" (it divides by
        ``|n/2 - 1|``, which is 0 at ``n = 2``); or if ``s_min < 0`` or ``s_min > s_max``.
    TypeError
        If ``n`` is not an int.

    See Also
    --------
    resource_changes : the same amounts assigned to agents from their ranks, with ties.

    References
    ----------
    Implements Eq. 19 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 4.2.2).

    Examples
    --------
    >>> allocate_resources(4, 1, 5)
    array([ 5.,  1., -1., -5.])
    """
    n = _int(n, "n")
    if n <= 2:
        raise ValueError(
            f"Eq. 19 is defined for n > 2 agents (it divides by |n/2 - 1|, zero at n = 2); got n={n}"
        )
    lo, hi = _check_range(s_min, s_max)
    return _allocation_table(n, lo, hi)


def _group_ranks(keys: np.ndarray):
    """Tie groups of ``keys`` in increasing order (lower = better): group of each agent, sizes."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    gid = np.cumsum(np.concatenate([[True], sk[1:] != sk[:-1]])) - 1
    inv = np.empty_like(gid)
    inv[order] = gid
    return inv, np.bincount(gid)


def _changes(keys: np.ndarray, lo: float, hi: float, table: np.ndarray | None = None) -> np.ndarray:
    if table is None:
        table = _allocation_table(keys.shape[0], lo, hi)
    inv, counts = _group_ranks(keys)
    ends = np.cumsum(counts)
    cs = np.concatenate([[0.0], np.cumsum(table)])
    means = (cs[ends] - cs[ends - counts]) / counts
    return means[inv]


def _check_ranks(ranks, n: int | None = None) -> np.ndarray:
    r = _real(ranks, "ranks")
    if r.ndim != 1:
        raise ValueError(f"ranks must be 1-D (one value per agent); got shape {r.shape}")
    if n is not None and r.shape[0] != n:
        raise ValueError(f"ranks must have one value per agent ({n}); got {r.shape[0]}")
    if r.shape[0] <= 2:
        raise ValueError(f"Eq. 19 is defined for n > 2 agents; got {r.shape[0]} ranks")
    return r


def resource_changes(ranks, s_min: float, s_max: float) -> np.ndarray:
    """Resources each agent receives from its rank by Eq. 19, with ties shared.

    Agents are placed in order of increasing ``ranks`` (rank 1 = best); each takes the Eq. 19
    amount of its position. Agents with **equal** rank values share equally the amounts of
    the positions they jointly occupy (the mean over those positions), which is deterministic,
    favours no agent index, keeps the total at zero and keeps the amounts non-increasing in
    rank.

    Parameters
    ----------
    ranks : array_like of float
        One value per agent, lower = better. Only order and ties matter, so a permutation of
        ``1..n``, competition ranks (``1, 2, 2, 4``) or fractional ranks give the same result.
    s_min, s_max : float
        As in :func:`allocate_resources`.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``: the change of each agent's resources, summing to zero.

    Raises
    ------
    ValueError
        If ``ranks`` is not 1-D, has ``n <= 2`` entries or non-finite values, or the range is
        invalid.

    References
    ----------
    Implements Eq. 19 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 4.2.2); the sharing of
    ties is normlab's convention (the paper's LLM matrix returns a strict ranking).

    Examples
    --------
    >>> resource_changes([2, 1, 3, 4], 1, 5)
    array([ 1.,  5., -1., -5.])
    >>> resource_changes([1, 1, 3, 4], 1, 5)  # a tie for first shares (5 + 1) / 2
    array([ 3.,  3., -1., -5.])
    """
    r = _check_ranks(ranks)
    lo, hi = _check_range(s_min, s_max)
    return _changes(r, lo, hi)


def _min_ranks(keys: np.ndarray) -> np.ndarray:
    """Competition ranks (1, 2, 2, 4) of ``keys``, lower key = better rank."""
    inv, counts = _group_ranks(keys)
    starts = np.cumsum(counts) - counts
    return (starts[inv] + 1).astype(np.float64)


def gini(x, *, axis: int = -1):
    """Gini coefficient ``G = sum_ij |x_i - x_j| / (2 n^2 mean(x))`` along ``axis``.

    Parameters
    ----------
    x : array_like of float
        Holdings (e.g. resources ``S_i``), one axis of agents.
    axis : int, optional
        Axis of the agents (default: last).

    Returns
    -------
    float or numpy.ndarray
        ``G`` in ``[0, 1 - 1/n]``; 0 for equal holdings. **NaN where any holding is negative**
        or where the total is not positive: the Gini coefficient is defined for non-negative
        holdings only (with debts the formula leaves ``[0, 1]`` -- Eq. 19 as written drives
        LTRHA resources negative, and the formula gave 7.5 and 15 there -- and no longer
        measures inequality). Count the negative holdings to see why
        (:meth:`~normlab.theory.itcmas.LTRHAResult.inequality` has ``n_negative``), or keep
        resources non-negative (``simulate_ltrha(floor=0)``).

    Raises
    ------
    ValueError
        If ``x`` is not finite or has no agents along ``axis``.

    References
    ----------
    Resource inequality for the LTRHA resources of Zhang et al., ITCMA-S, arXiv:2409.06750
    (Fig. 7a); mean-difference form of the Gini coefficient.
    """
    a = _real(x, "x")
    if a.ndim == 0 or a.shape[axis] == 0:
        raise ValueError("x needs at least one agent along axis")
    a = np.sort(np.moveaxis(a, axis, -1), axis=-1)
    n = a.shape[-1]
    i = np.arange(1, n + 1, dtype=np.float64)
    total = a.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = (a @ (2.0 * i - n - 1.0)) / (n * total)
    return _out(np.where((total > 0) & (a[..., 0] >= 0), g, np.nan))  # a is sorted: a[..., 0] is the smallest


def ranks_from_order(order: Sequence[str], agents: Sequence[str]) -> np.ndarray:
    """Ranks (lower = better) from an ordered list of agent names, best first.

    Agents missing from ``order`` tie after the last listed one (they share the lowest
    positions under Eq. 19), so a partial answer is usable and deterministic.

    Parameters
    ----------
    order : sequence of str
        Agent names, best first; each at most once.
    agents : sequence of str
        All agent names (index ``i`` = agent ``i``).

    Returns
    -------
    numpy.ndarray
        Shape ``(len(agents),)``, float64 ranks for :func:`resource_changes`.

    Raises
    ------
    ValueError
        If ``order`` names an unknown agent or repeats one.
    TypeError
        If ``order`` is a single string.

    References
    ----------
    Output of the LLM matrix of Sect. 4.2.2 of Zhang et al., ITCMA-S, arXiv:2409.06750.
    """
    if isinstance(order, str):
        raise TypeError("order must be a sequence of agent names, not a single string")
    index = {a: i for i, a in enumerate(agents)}
    ranks = np.full(len(index), float(len(order) + 1))
    seen = set()
    for pos, name in enumerate(order, start=1):
        if name not in index:
            raise ValueError(f"unknown agent {name!r} in the ranking; agents are {tuple(agents)}")
        if name in seen:
            raise ValueError(f"agent {name!r} appears twice in the ranking")
        seen.add(name)
        ranks[index[name]] = pos
    return ranks
