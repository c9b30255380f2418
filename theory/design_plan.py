"""The plan of a prediction design (:class:`DesignPlan`): what :func:`~normlab.theory.design.strategy_design`
simulates for every draw -- its stages, their run counts and lengths, the committed-minority grid and
the flip rule -- as one frozen value checked before any work, and which of its runs serve two readings.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Fig. 3,
Table S3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normlab._validate import Boolean, Check, Int, Real, Relation, validated

from .criteria import PUBLISHED_FLIP_THRESHOLD
from .name_order import check_order
from .spec import _flip_threshold

__all__ = ["DesignPlan", "mixture_sources", "sweep_shares"]


def sweep_shares(counts, strength) -> np.ndarray:
    """Where the relative-strength shares come from the committed-minority sweep.

    Exploration (nobody committed) and pull (one agent committed) are the challenger's share over
    the first ``within`` rounds of runs from a consensus attacked by 0 and 1 committed agents
    (Flint Ashery et al. 2025, Fig. S9): the sweep's runs at counts 0 and 1, played to their cap
    instead of stopped at a flip (the flip readings see them only up to the flip, so they are the
    same).

    Returns
    -------
    numpy.ndarray of int64, shape (2,)
        ``[c]``: the index in ``counts`` of count ``c`` (0, 1) whose runs give the share, -1 where
        the strength runs are not played or the sweep lacks that count (its own runs then).
    """
    counts = np.asarray(counts, np.int64)
    out = np.full(2, -1, np.int64)
    if strength:
        for c in (0, 1):
            hit = np.flatnonzero(counts == c)
            if hit.size:
                out[c] = hit[0]
    return out


def mixture_sources(directions, mix_kx, n_agents) -> np.ndarray:
    """Which relative-strength mixtures are the same experiment as one of the reverse direction.

    Direction ``(x, y)``'s mixture ``f`` starts ``mix_kx[f]`` agents on ``x`` and the others on
    ``y``; the reverse direction ``(y, x)``'s mixture ``f'`` with ``mix_kx[f'] = N - mix_kx[f]``
    starts the same number of agents on each name. Agents are exchangeable (complete graph, random
    pairs, nobody committed), so both are one experiment: its runs won by ``x`` are direction
    ``(x, y)``'s wins at ``f`` and those won by ``y`` the reverse direction's at ``f'``
    (Flint Ashery et al. 2025, Supplementary Text "Characterizing Relative Strength", Fig. S9).

    Returns
    -------
    numpy.ndarray of int64, shape (n_dirs, n_mix, 2)
        ``[i, f] = (i', f')``: direction ``i``'s mixture ``f`` is read from mixture ``f'`` of the
        earlier direction ``i' < i``; ``(-1, -1)``: simulated (the first direction of a pair, or no
        mixture with the complementary count, as for ``f = 1/2`` at odd ``N``).
    """
    dirs = np.asarray(directions, np.int64).reshape(-1, 2)
    kx = np.asarray(mix_kx, np.int64)
    src = np.full((len(dirs), len(kx), 2), -1, np.int64)
    for i, (x, y) in enumerate(dirs):
        rev = [i2 for i2 in range(i) if dirs[i2, 0] == y and dirs[i2, 1] == x]
        if not rev:
            continue
        for f in range(len(kx)):
            hit = np.flatnonzero(kx == int(n_agents) - kx[f])
            if hit.size:
                src[i, f] = (rev[0], hit[0])
    return src

def _pair_of_orders(value, name):
    if isinstance(value, str) or len(value) != 2:
        raise ValueError(f"name_order must be a pair (convergence runs, committed runs); got {value!r}")
    return tuple(value)


def _order_bias_for(value, name, values):
    g = value
    for order in values["name_order"]:
        g, _ = check_order(value, order)
    return g


def _int64_array(value, name):
    return np.ascontiguousarray(value, np.int64)


def _directions(value, name):
    return np.asarray(value, np.int64).reshape(-1, 2)


@validated
@dataclass(frozen=True, eq=False, kw_only=True)
class DesignPlan:
    """What a prediction design simulates for every draw (:func:`strategy_design`): the stages,
    their run counts and lengths, the committed-minority grid and the flip rule.

    Parameters
    ----------
    consensus : bool
        Play the convergence runs (``n_cons`` runs from empty memories, ``stop="streak"``, at
        most ``cons_rounds`` rounds).
    n_cons, cons_rounds : int
    directions : array_like of int, shape (n_dirs, 2)
        ``(x, y)`` name index pairs: a consensus on ``x`` attacked by agents committed to ``y``.
    counts : array_like of int
        Committed counts of every direction.
    n_flip, n_design : int
        Runs per count read by the first-passage criterion / by the published ensemble rule.
    within, window : int
        Rounds of the first-passage criterion / of the published rule's window.
    monotone : bool
        Stop a sweep after two counts where every run flipped and the rule was met.
    level : float
        Share of flipping runs the first-passage critical mass needs.
    flip_sum : float
        The published rule's threshold on the sum of the last three round shares.
    strength : bool
        Play the relative-strength runs (0 and 1 committed agent, and the mixtures ``mix_kx``).
    mix_kx : array_like of int
        Agents starting on ``x`` in each mixture of the strength runs.
    flip_threshold : float
        The running flip check's per-round threshold.
    order_bias : float
        First-listed bias ``gamma`` (:mod:`normlab.theory.name_order`); 0 plays the tables as they are.
    name_order : pair of str
        Name order of the convergence runs and of the committed-minority runs (default the
        authors' protocols, ``("independent", "shared")``).
    """

    consensus: bool
    n_cons: int
    cons_rounds: int
    directions: np.ndarray
    counts: np.ndarray
    n_flip: int
    n_design: int
    within: int
    window: int
    monotone: bool
    level: float
    flip_sum: float
    strength: bool
    mix_kx: np.ndarray
    flip_threshold: float = PUBLISHED_FLIP_THRESHOLD
    order_bias: float = 0.0
    name_order: tuple = ("independent", "shared")

    _parameter_constraints = {
        "consensus": Boolean(), "n_cons": Int(0), "cons_rounds": Int(0), "directions": Check(_directions),
        "counts": Check(_int64_array), "n_flip": Int(0), "n_design": Int(0), "within": Int(0), "window": Int(0),
        "monotone": Boolean(), "level": Real(), "flip_sum": Real(), "strength": Boolean(),
        "mix_kx": Check(_int64_array), "flip_threshold": Check(_flip_threshold),
        "name_order": Check(_pair_of_orders), "order_bias": Relation(_order_bias_for),
    }

