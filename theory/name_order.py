"""The order in which a prompt lists the names: a first-listed bias, shared or independent per interaction.

An LLM agent sees the name pool in the order its prompt lists it, and may lean toward the name
listed first. The published protocols shuffle that order uniformly, so the order-averaged table
p(name | memory state) -- what a fit from decisions estimates -- describes every single choice.
But the protocols shuffle differently (Flint Ashery et al. 2025, the authors'
``simulation_module.py``): ``population()`` (convergence runs) shuffles once *per player*, so the
two agents of an interaction see independent orders; ``committed()`` (committed-minority runs)
shuffles once *per interaction*, so the two uncommitted agents see the *same* order, and a
first-listed bias makes their choices agree more often than their tables say.

Model. With ``f`` the name listed first, an agent in state ``s`` picks name ``w`` with

    p_f(w | s) = q(w | s) exp(gamma [w = f]) / Z_f(s),

``gamma`` the first-listed bias (a logit shift toward the first-listed name; negative: toward the
others), and ``q`` chosen so that the average over the ``W`` equally likely first-listed names is
exactly the order-averaged table: ``mean_f p_f(w | s) = p(w | s)`` (:func:`order_tables`). So the
bias changes no single choice's distribution -- with independent orders the game is the same game in
law -- and only correlates the choices of two agents who see the same order.

``NAME_ORDERS``: ``"independent"`` (per agent, ``population()``) and ``"shared"`` (per interaction,
``committed()``). The kernels take the per-order tables as ``W`` blocks of ``n_states`` rows
(block ``f``: name ``f`` listed first) and a mode (:func:`order_mode`): 0 = no bias (the plain
table; no random draw for the order), 1 = shared, 2 = independent.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods (prompts with
the names in random order), the authors' code ``simulation_module.py`` (``population``,
``committed``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["NAME_ORDERS", "order_tables", "order_mode", "check_order", "pair_agreement_probability", "MAX_ORDER_BIAS"]

#: How the name order is drawn: per agent (``population()``) or once per interaction (``committed()``).
NAME_ORDERS = ("independent", "shared")

#: Largest first-listed bias accepted (logit units; beyond it the exact per-order tables converge slowly).
MAX_ORDER_BIAS = 8.0

_TOL = 1e-13
_MAX_ITER = 20_000


def check_order(order_bias, name_order) -> tuple[float, str]:
    """Validated ``(gamma, name_order)`` (one-line errors)."""
    if isinstance(order_bias, bool) or not isinstance(order_bias, (int, float, np.integer, np.floating)):
        raise TypeError(f"order_bias must be a number (logit units); got {order_bias!r}")
    g = float(order_bias)
    if not math.isfinite(g) or abs(g) > MAX_ORDER_BIAS:
        raise ValueError(f"order_bias must be finite with |order_bias| <= {MAX_ORDER_BIAS}; got {order_bias!r}")
    if name_order not in NAME_ORDERS:
        raise ValueError(f"name_order must be one of {NAME_ORDERS}; got {name_order!r}")
    return g, str(name_order)


def order_mode(order_bias: float, name_order: str) -> int:
    """The kernels' order mode: 0 without bias (no draw for the order), 1 shared, 2 independent."""
    g, o = check_order(order_bias, name_order)
    if g == 0.0:
        return 0
    return 1 if o == "shared" else 2


def order_tables(table, order_bias: float) -> np.ndarray:
    """Per-order tables of an order-averaged table under a first-listed bias.

    Parameters
    ----------
    table : array_like, shape (..., W)
        Rows p(name | state) (probability vectors; a row that is not one -- negative, NaN, not
        summing to 1 -- is copied into every block unchanged, so a kernel reports it as it would).
    order_bias : float
        ``gamma``, the logit shift toward the name listed first.

    Returns
    -------
    numpy.ndarray, shape (W, ..., W)
        Block ``f``: p_f(name | state) with name ``f`` listed first; their mean over ``f`` equals
        ``table`` (to 1e-13). ``order_bias = 0`` gives ``W`` copies of the table.

    Raises
    ------
    ValueError
        ``|order_bias|`` above :data:`MAX_ORDER_BIAS`, fewer than two names.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods; the authors'
    ``simulation_module.py``.
    """
    g, _ = check_order(order_bias, "shared")
    p = np.asarray(table, dtype=np.float64)
    if p.ndim < 1 or p.shape[-1] < 2:
        raise ValueError(f"table must have one column per name (>= 2); got shape {p.shape}")
    W = p.shape[-1]
    shape = p.shape
    p = p.reshape(-1, W)
    valid = np.all((p >= 0.0) & (p <= 1.0 + 1e-9), axis=1) & (np.abs(p.sum(axis=1) - 1.0) <= 1e-6)
    out = np.repeat(p[None], W, axis=0)  # invalid rows (and gamma = 0) stay as given
    if g != 0.0 and valid.any():
        pv = p[valid]
        out[:, valid] = np.moveaxis(_solve(pv, g), 1, 0)
    return out.reshape((W,) + shape)


def _per_order(q, e):
    """``P[n, f, w] = q_w e^[w = f] / Z_f`` for rows ``q`` and ``e = exp(gamma)``."""
    W = q.shape[1]
    Z = 1.0 + q * (e - 1.0)  # Z_f, indexed by the first-listed name f
    P = q[:, None, :] / Z[:, :, None]
    idx = np.arange(W)
    P[:, idx, idx] *= e
    return P


def _solve2(p, e):
    """Two names in closed form: with odds ``x = q_0 / q_1`` the mean condition is the quadratic
    ``2e(1 - p) x^2 + (e^2 + 1)(1 - 2p) x - 2pe = 0`` (``p = p(name 0)``); its positive root,
    written without cancellation."""
    p0 = p[:, 0]
    out = np.empty((len(p), 2, 2))
    a = 2.0 * e * (1.0 - p0)
    b = (e * e + 1.0) * (1.0 - 2.0 * p0)
    root = np.sqrt(b * b + 16.0 * e * e * p0 * (1.0 - p0))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(b >= 0, 4.0 * p0 * e / (b + root), (root - b) / (2.0 * a))
        q0 = np.where(p0 >= 1.0, 1.0, np.where(p0 <= 0.0, 0.0, x / (1.0 + x)))
    q = np.column_stack([q0, 1.0 - q0])
    out[:] = _per_order(q, e)
    return out


def _solve(p, g):
    """``P[n, f, w]`` with ``mean_f P = p`` (closed form for two names, else iterative proportional
    scaling of ``q``)."""
    e = math.exp(g)
    if p.shape[1] == 2:
        return _solve2(p, e)
    q = p.copy()
    pos = p > 0.0
    for _ in range(_MAX_ITER):
        P = _per_order(q, e)
        m = P.mean(axis=1)
        if np.max(np.abs(m - p)) < _TOL:
            return P
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(pos, q * p / np.where(pos, m, 1.0), 0.0)
        q /= q.sum(axis=1, keepdims=True)
    raise ValueError(f"per-order tables did not converge for order_bias={g} (max error {np.max(np.abs(m - p)):.1e})")


def pair_agreement_probability(p_i, p_j, order_bias: float = 0.0, name_order: str = "shared") -> np.ndarray:
    """P(two agents pick the same name) given their order-averaged rows, under the name-order protocol.

    Parameters
    ----------
    p_i, p_j : array_like, shape (n, W)
        Each agent's p(name | its state).
    order_bias : float, optional
    name_order : {"shared", "independent"}, optional

    Returns
    -------
    numpy.ndarray, shape (n,)
        ``sum_w p_i(w) p_j(w)`` (independent orders or no bias), else
        ``mean_f sum_w p_f,i(w) p_f,j(w)``.
    """
    g, o = check_order(order_bias, name_order)
    a = np.asarray(p_i, float)
    b = np.asarray(p_j, float)
    if g == 0.0 or o == "independent":
        return np.sum(a * b, axis=-1)
    return np.mean(np.sum(order_tables(a, g) * order_tables(b, g), axis=-1), axis=0)
