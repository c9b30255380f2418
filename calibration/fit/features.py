"""Design matrices of the logistic strategy models (two names), in an identifiable basis.

:class:`normlab.theory.strategies.LogitStrategy` gives name ``n`` the utility
``b_n + sum_f theta[n, f] x_f(n, m)`` on the memory features
:data:`~normlab.theory.strategies.FEATURE_NAMES`. For ``W = 2`` the log-odds of name 1 is
``(b_1 - b_0) + sum_f theta[1, f] x_f(1) - theta[0, f] x_f(0)``. Written with
``a_f = (theta[1, f] + theta[0, f]) / 2`` and ``c_f = (theta[1, f] - theta[0, f]) / 2`` it is

``logit p(name 1 | m) = b + sum_f a_f (x_f(1) - x_f(0)) + sum_f c_f (x_f(1) + x_f(0))``.

The ``a`` part is **relabelling-symmetric** (swapping the names swaps ``x(1)`` and ``x(0)`` and
flips its sign); the intercept ``b`` and the ``c`` part are invariant under relabelling, so they
*are* the strategy asymmetry -- the microscopic origin of collective bias (Flint Ashery et al. 2025, Table 1).
Three sums are constant for a non-empty memory (``partner_share``, ``own_share`` and
``last_partner`` sum to 1 over the two names), so only one of them is kept, as the column
``nonempty``; the others (``success_share``, ``last_success``, ``streak``) vary. The columns are
identifiable and map exactly onto a :class:`~normlab.theory.strategies.LogitStrategy`
(:func:`to_logit_strategy`). Two further reductions make the basis identifiable and well
conditioned for the sampler: for two names ``success_share(1) - success_share(0)`` equals
``(partner_share(1) - partner_share(0) + own_share(1) - own_share(0)) / 2`` (an entry is a success
on name 1 iff both plays are 1), so that symmetric column is dropped; and the intercept is split
into two disjoint indicators, ``bias_empty`` (the first move, i.e. individual bias) and
``bias_nonempty`` (any later move), instead of an intercept plus a ``nonempty`` shift, which would
be strongly correlated. The 10 columns are :data:`COLUMNS`.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1 (strategy
asymmetry under relabelling), Figs. S8-S10.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from normlab.theory import LogitStrategy
from normlab.theory.strategies import decode_state, memory_features, n_states

__all__ = ["COLUMNS", "SYMMETRIC_COLUMNS", "ASYMMETRIC_COLUMNS", "COLUMN_MEANINGS", "design_matrix",
           "to_logit_strategy"]

_F = ("partner_share", "own_share", "last_partner", "last_success", "streak")
_FEATURE_INDEX = (0, 1, 3, 4, 5)  # positions in normlab.theory.strategies.FEATURE_NAMES
#: Relabelling-symmetric columns: ``x_f(1) - x_f(0)``.
SYMMETRIC_COLUMNS = tuple(f"sym_{f}" for f in _F)
#: Relabelling-invariant (bias) columns: empty / non-empty memory indicators and ``x_f(1) + x_f(0)``.
ASYMMETRIC_COLUMNS = ("bias_empty", "bias_nonempty", "bias_success_share", "bias_last_success", "bias_streak")
COLUMNS = SYMMETRIC_COLUMNS + ASYMMETRIC_COLUMNS
#: One line per coefficient: what a positive value does to ``logit p(second name | memory)``.
#: Symmetric coefficients act the same on both names (swapping the names flips their feature's
#: sign); the ``bias_`` ones favour the second name whatever the memory shows -- the asymmetry.
COLUMN_MEANINGS = {
    "sym_partner_share": "follows the name its partners played more often (recency-weighted share)",
    "sym_own_share": "repeats the name it played more often itself",
    "sym_last_partner": "copies its last partner's play",
    "sym_last_success": "keeps the name of its last interaction when that was a success (win-stay)",
    "sym_streak": "keeps the name of its current run of successes, more the longer it is",
    "bias_empty": "favours the second name with an empty memory (individual bias; < 0: the first)",
    "bias_nonempty": "favours the second name after any non-empty memory, whatever it holds",
    "bias_success_share": "favours the second name the more of the memory's interactions were successes",
    "bias_last_success": "favours the second name after a success, on either name",
    "bias_streak": "favours the second name the longer the current run of successes, on either name",
}


@lru_cache(maxsize=16)
def _design(memory: int, decay: float) -> np.ndarray:
    S = n_states(2, memory)
    X = np.zeros((S, len(COLUMNS)))
    for s in range(S):
        ent = decode_state(s, 2, memory)
        x = np.asarray(memory_features(ent, 2, memory, decay))  # (2, 6)
        X[s, :5] = x[1, _FEATURE_INDEX] - x[0, _FEATURE_INDEX]
        X[s, 5] = 0.0 if ent else 1.0
        X[s, 6] = 1.0 if ent else 0.0
        X[s, 7] = x[1, 2] + x[0, 2]
        X[s, 8] = x[1, 4] + x[0, 4]
        X[s, 9] = x[1, 5] + x[0, 5]
    X.setflags(write=False)
    return X


def design_matrix(memory: int, decay: float) -> np.ndarray:
    """Design matrix of every memory state for ``W = 2``, columns :data:`COLUMNS`.

    Parameters
    ----------
    memory : int
        Memory length ``H``.
    decay : float
        Recency decay of the features, in (0, 1].

    Returns
    -------
    numpy.ndarray, shape (n_states(2, H), 10)
        Read-only; row ``s`` is state ``s`` of :mod:`normlab.theory.strategies`.
    """
    if not 0.0 < float(decay) <= 1.0:
        raise ValueError(f"decay must be in (0, 1]; got {decay}")
    return _design(int(memory), float(decay))


def to_logit_strategy(coef, decay: float):
    """The :class:`~normlab.theory.strategies.LogitStrategy` with log-odds ``X @ coef``.

    Parameters
    ----------
    coef : array_like, shape (10,)
        Coefficients in :data:`COLUMNS` order.
    decay : float

    Returns
    -------
    normlab.theory.strategies.LogitStrategy
    """
    c = np.asarray(coef, dtype=float)
    if c.shape != (len(COLUMNS),):
        raise ValueError(f"coef must have {len(COLUMNS)} entries ({', '.join(COLUMNS)})")
    a = np.zeros(6)
    a[list(_FEATURE_INDEX)] = c[:5]
    cc = np.zeros(6)
    cc[0] = c[6] - c[5]  # non-empty shift, carried by partner_share (x(1) + x(0) = 1 when non-empty)
    cc[2] = c[7]
    cc[4] = c[8]
    cc[5] = c[9]
    theta = np.vstack([a - cc, a + cc])
    return LogitStrategy(theta, np.array([0.0, c[5]]), decay=decay)
