"""What the prediction engines and the :class:`~normlab.calibration.Prediction` share: the
constants of the predicted experiments, the posterior draws played (:func:`table_draws`), the
directions of the committed-minority sweeps, and the readings of simulated runs (the winner of a
streak-stopped run, the padded success curve, the first round reaching a level, where a curve
crosses a level, the boundary of a convention's basin).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1, Fig. 2B,
Methods "Committed Minorities", Supplementary Text "Characterizing Relative Strength".
"""

from __future__ import annotations

import contextlib

import numpy as np

from normlab.llm_runs.published.ainorms import first_position_reaching
from normlab.theory import StrategyTable
from normlab.theory.stats import interval_crossing

from ..fit.posterior import StrategyFit

__all__ = ["table_draws", "first_round_reaching", "NONE", "FLIP_LEVEL", "DESIGN_RUNS", "WIDTH_FRACTIONS"]

NONE = "none"
FLIP_LEVEL = 0.5
#: Runs per committed count in the committed-minority experiments of Flint Ashery et al. (2025, Methods).
DESIGN_RUNS = 10
WIDTH_FRACTIONS = tuple(k / 8 for k in range(1, 8))


def table_draws(fit, n_draws: int, *, rng=None, return_index: bool = False):
    """Posterior draws of a table as a list of :class:`~normlab.theory.strategies.StrategyTable`.

    Parameters
    ----------
    fit : StrategyFit, StrategyTable or sequence of StrategyTable
        A fit (drawn ``n_draws`` times), one fixed table (repeated: Monte Carlo noise only) or
        explicit draws (used as given; ``n_draws`` must not exceed their number).
    n_draws : int
    rng : optional
    return_index : bool, optional
        Also return which stored posterior draw each table is (:meth:`StrategyFit.sample_tables`;
        None when there is none: a fixed table, explicit draws, a conjugate fit).

    Returns
    -------
    list of normlab.theory.strategies.StrategyTable
        (with ``return_index``: ``(tables, index)``)
    """
    if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
        raise ValueError(f"n_draws must be an int >= 1; got {n_draws!r}")
    index = None
    if isinstance(fit, StrategyFit):
        tabs, index = fit.tables(int(n_draws), rng=rng, return_index=True)
    elif isinstance(fit, StrategyTable):
        tabs = [fit] * int(n_draws)
    elif isinstance(fit, (list, tuple)) and fit and all(isinstance(t, StrategyTable) for t in fit):
        if n_draws > len(fit):
            raise ValueError(f"asked for {n_draws} draws but only {len(fit)} tables were given")
        tabs = list(fit[:n_draws])
    else:
        raise TypeError(f"fit must be a StrategyFit, a StrategyTable or a list of them; got {type(fit).__name__}")
    return (tabs, index) if return_index else tabs


@contextlib.contextmanager
def _numba_threads(n):
    if n is None:
        yield
        return
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def _winners(res, names) -> list:
    """Winner per run of a streak-stopped strategy game (majority of the last 3 rounds)."""
    out = []
    for k in range(res.n_runs):
        if res.stop_reason[k] != "streak":
            out.append(NONE)
            continue
        a, b = res.round_offsets[k], res.round_offsets[k + 1]
        prod = res.round_production[max(a, b - 3):b].sum(axis=0)
        out.append(names[int(np.argmax(prod))])
    return out


def _padded_success(res, n_rounds) -> np.ndarray:
    m = res.success_matrix(n_rounds)
    stopped = res.stop_reason == "streak"
    m[stopped] = np.where(np.isnan(m[stopped]), 1.0, m[stopped])
    return m


def first_round_reaching(curve, threshold=0.95) -> float:
    """First round (from 1) where ``curve >= threshold`` (1e-9 tolerance); NaN if never (the
    readings of simulated runs keep NaN for "not reached"). The rule is
    :func:`normlab.llm_runs.published.ainorms.first_position_reaching`, as for the published curves."""
    k = first_position_reaching(curve, threshold)
    return float("nan") if k is None else float(k + 1)


def _basin_boundary(p_win) -> float:
    """The mixture fraction where P(consensus on the majority name) crosses 1/2 over
    :data:`WIDTH_FRACTIONS` (1 if it never does, 0 if it wins even from the smallest mixture)."""
    b = interval_crossing(WIDTH_FRACTIONS, p_win, 0.5)
    if np.isnan(b):
        b = 1.0  # X never wins a majority of runs, even from a 7/8 mixture
    elif b == WIDTH_FRACTIONS[0] and p_win[0] >= 0.5:
        b = 0.0  # X wins even from a 1/8 mixture
    return b


def _directions(names, directions):
    W = len(names)
    if directions is None:
        return [(x, y) for x in names for y in names if x != y] if W > 2 else [(names[0], names[1]), (names[1], names[0])]
    out = []
    for d in directions:
        if isinstance(d, str):
            if d not in names:
                raise ValueError(f"direction {d!r} is not a name of {names}")
            if W != 2:
                raise ValueError("with more than two names give directions as (majority, challenger) pairs")
            out.append((d, names[1 - names.index(d)]))
        else:
            x, y = d
            if x not in names or y not in names or x == y:
                raise ValueError(f"direction {d!r} must be two different names of {names}")
            out.append((x, y))
    return out


def _fit_llm(fit):
    """The LLM a fit was made from (``meta["llm"]``, or the one model of its source runs)."""
    if not isinstance(fit, StrategyFit):
        return None
    llm = fit.meta.get("llm")
    models = (fit.meta.get("source") or {}).get("models") or []
    return llm if llm else (models[0] if len(models) == 1 else None)


def _key(x, y, W):
    return f"overturn_{x}" if W == 2 else f"overturn_{x}_by_{y}"
