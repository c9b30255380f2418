"""The plan of a prediction design (:class:`DesignPlan`): what :func:`~normlab.theory.design.strategy_design`
simulates for every draw -- its stages, their run counts and lengths, the committed-minority grid and
the flip rule -- as one frozen value checked before any work.

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

__all__ = ["DesignPlan"]

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

