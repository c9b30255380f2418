"""The published flip rule in Numba: the pieces of :mod:`normlab.theory.criteria` the kernels run.

- :func:`flip_reached` -- :func:`normlab.theory.criteria.flip_reached` compiled (the same
  source): the running flip check at a round's end.
- :func:`end_round` and :func:`window_flip_reached` -- the three-round window of the running
  check: record a finished round's counts in the ring ``ring_c``/``ring_u`` (challenger and all
  uncommitted productions), and apply :func:`flip_reached` to the ring's sums. Every game kernel
  (naming game, strategy game, the design's lean run) calls them at each round's end.
- :func:`last3_sum` -- a run's own last three round shares summed left to right, as
  :func:`normlab.theory.criteria.published_rule` decides which runs to pad.
- :func:`published_from_shares` -- :func:`normlab.theory.criteria.published_rule` on shares
  already cut at the window, with the same summation order (the prediction design).

All are inlined into their callers (``inline="always"``): no call overhead in the kernels' loops.
"""

from __future__ import annotations

import numpy as np

from normlab._jit import njit

from .criteria import LAST_ROUNDS
from .criteria import flip_reached as _flip_reached_py

flip_reached = njit(inline="always")(_flip_reached_py)


@njit(inline="always")
def end_round(ring_c, ring_u, slot, committed_productions, uncommitted_productions):
    """Write a finished round's counts into slot ``slot`` of the three-round ring; return the next slot."""
    ring_c[slot] = committed_productions
    ring_u[slot] = uncommitted_productions
    slot += 1
    if slot == LAST_ROUNDS:
        slot = 0
    return slot


@njit(inline="always")
def window_flip_reached(ring_c, ring_u, flip_thr):
    """:func:`flip_reached` on the sums of the three-round ring (call it from the third round on)."""
    return flip_reached(ring_c[0] + ring_c[1] + ring_c[2], ring_u[0] + ring_u[1] + ring_u[2], flip_thr)


@njit(inline="always")
def last3_sum(sh, k, n_rounds):
    """Sum of row ``k``'s last three values among its first ``n_rounds`` (left to right)."""
    s = 0.0
    for q in range(max(0, n_rounds - LAST_ROUNDS), n_rounds):
        s += sh[k, q]
    return s


def _published_from_shares_py(sh, lens, pad, n_runs, window, flip_sum, mean):
    """:func:`normlab.theory.criteria.published_rule` on per-run shares already cut at ``window``
    (``lens``: rounds per run, ``pad``: runs padded with 1s), with the same summation order;
    returns ``(last3, success)``."""
    longest = 0
    any_pad = False
    for k in range(n_runs):
        longest = max(longest, lens[k])
        any_pad = any_pad or pad[k]
    L = min(window, longest + 30) if any_pad else min(window, longest)
    for q in range(L):
        s = 0.0
        n = 0
        for k in range(n_runs):
            if q < lens[k]:
                v = sh[k, q]
                if not np.isnan(v):
                    s += v
                    n += 1
            elif pad[k]:
                s += 1.0
                n += 1
        mean[q] = s / n if n > 0 else np.nan
    last3 = 0.0
    for q in range(max(0, L - LAST_ROUNDS), L):
        last3 += mean[q]
    return last3, last3 >= flip_sum


published_from_shares = njit(cache=True)(_published_from_shares_py)
