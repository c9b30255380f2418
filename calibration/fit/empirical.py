"""The empirical family (fit kind ``empirical``): a conjugate Beta/Dirichlet posterior per memory state.

``p(. | s) ~ Dirichlet(counts[s] + prior)`` independently for every state. It needs no sampler and
is exact where a state is well observed, but it does not generalise: a state never seen in the
training runs keeps the flat prior (every probability equally plausible), and that uncertainty is
carried into every prediction. This is the honest answer to the trap of the design of Flint Ashery et al. (2025) -- the
convergence runs rarely visit the mixed memories a committed minority creates. A fit keeps the
counts and the prior; a table draw is an independent Dirichlet per state, and the posterior mean
is exact. It works for any pool size ``W``.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1 (per-state
frequencies with binomial tests), Fig. S8 (the full table, H = 5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normlab._validate import Check, validated

from .inputs import StateCounts
from .posterior import FitFamily, FitParams, StrategyFit, _positive_prior

__all__ = ["EmpiricalFamily", "EmpiricalParams", "EMPIRICAL", "fit_empirical"]


@validated
@dataclass(frozen=True)
class EmpiricalParams(FitParams):
    """The parameter of an ``empirical`` fit: the Dirichlet concentration per name (``prior``, > 0)."""

    prior: float = 1.0

    _parameter_constraints = {"prior": Check(_positive_prior)}


class EmpiricalFamily(FitFamily):
    """``p(. | s) ~ Dirichlet(counts[s] + prior)`` independently for every state (conjugate: no
    stored draws, an exact mean)."""

    conjugate = True
    exact_mean = True
    Params = EmpiricalParams

    def fit(self, counts, *, rng=None, **kwargs) -> StrategyFit:
        # the sampler settings of the other kinds do not apply (calibrate and compare_models pass them)
        return fit_empirical(counts, **{k: v for k, v in kwargs.items() if k in ("prior", "meta")})

    def sample_tables(self, fit, n_draws: int, g) -> np.ndarray:
        S, W = fit.counts.shape
        a = fit.counts + fit.prior
        x = g.standard_gamma(np.broadcast_to(a, (n_draws, S, W)))
        x = np.maximum(x, 1e-300)
        return x / x.sum(axis=2, keepdims=True)

    def mean_table(self, fit, n_draws: int, rng) -> np.ndarray:
        a = fit.counts + fit.prior
        return a / a.sum(axis=1, keepdims=True)

    def empty_memory(self, fit):
        # p(name | empty memory) without drawing the whole table
        return (fit.counts[0] + fit.prior) / (fit.counts[0] + fit.prior).sum()


EMPIRICAL = EmpiricalFamily()


def fit_empirical(counts: StateCounts, *, prior: float = 1.0, meta: dict | None = None) -> StrategyFit:
    """Fit the empirical (per-state Dirichlet) strategy table.

    Parameters
    ----------
    counts : StateCounts
        Decision counts (:func:`normlab.calibration.counts_from_log` /
        :func:`~normlab.calibration.counts_from_probes`).
    prior : float, optional
        Dirichlet concentration per name (1 = uniform prior; 0.5 = Jeffreys).
    meta : dict, optional
        Extra provenance stored in the fit.

    Returns
    -------
    StrategyFit
        ``kind="empirical"``; works for any pool size ``W``.

    Raises
    ------
    TypeError
        ``counts`` is not a :class:`StateCounts`.
    ValueError
        ``prior <= 0`` or no decision at all.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Fig. S8.
    """
    if not isinstance(counts, StateCounts):
        raise TypeError(f"counts must be a StateCounts; got {type(counts).__name__}")
    if not (isinstance(prior, (int, float, np.floating)) and prior > 0):
        raise ValueError(f"prior must be a number > 0; got {prior!r}")
    c = counts.counts
    if c.sum() <= 0:
        raise ValueError("no decision to fit on (all counts are zero)")
    m = {"source": dict(counts.source), "groups": len(counts.groups)}
    m.update(meta or {})
    return StrategyFit(kind="empirical", names=counts.names, memory=counts.memory, counts=c,
                       params=EmpiricalParams(prior=float(prior)), meta=m)
