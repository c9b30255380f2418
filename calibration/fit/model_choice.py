"""Choosing and checking the strategy models: cross-validated model comparison, predictive density
of new decisions, posterior predictive checks.

The models are the registered fit kinds (:mod:`normlab.calibration.fit.registry`), one module per
family: ``empirical`` (:mod:`~normlab.calibration.fit.empirical`, a Dirichlet table per state),
``logit`` and ``logit_symmetric`` (:mod:`~normlab.calibration.fit.logit`, a logit on the memory
features, with and without bias columns) and ``hierarchical``
(:mod:`~normlab.calibration.fit.hierarchical`, the feature logit plus partially pooled state
effects); the PyMC ones are fitted with NUTS, their diagnostics (R-hat, bulk/tail ESS,
divergences) from ArviZ. :func:`compare_models` chooses among the registered kinds by K-fold
cross-validated log predictive density, holding out whole runs (or, with ``by="state"``, whole
memory states -- the situation of a committed minority driving agents into memories the
training runs never showed). The fitters (:func:`fit_logit`, :func:`fit_hierarchical`,
:func:`fit_strategy`, :func:`select_decay`, :func:`divergence_warning`) live with their families
and stay importable from here, their former home.

Model choice (documented in the shipped tables' ``meta["model_selection"]``; 5 folds, baseline
runs only): holding out whole runs, ``hierarchical`` is best for every shipped setting
(Llama-3.1 Q/M H = 5: held-out log-likelihood -5081 vs -5272 for ``logit``, -5343 ``empirical``,
-5407 ``logit_symmetric``; Llama-3 H = 3: -1098 vs -1136 ``empirical``, -1445 ``logit``; Llama-3
H = 5: -1389 vs -1663 ``empirical``). Holding out whole states, ``logit`` (Llama-3.1) or
``logit_symmetric`` (Llama-3 H = 3) is ahead of ``hierarchical`` by less than one fold-to-fold
standard error, and ``empirical`` collapses (it can only say 1/2 there). ``hierarchical`` is the
default (:data:`normlab.calibration.fit.registry.DEFAULT`): it is the only model close to the best in
both regimes, and it says how unsure it is where data are thin.

PyMC, PyTensor and ArviZ are imported inside the fitters, so ``import normlab.calibration``
stays light.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Figs.
S8-S10 (strategies by memory state, asymmetry under relabelling); A. Gelman et al., Bayesian Data
Analysis, 3rd ed. (2013), ch. 5 (hierarchical models) and ch. 7 (cross-validation);
A. Vehtari et al., Bayesian Analysis 16, 667 (2021) (rank-normalised R-hat and ESS).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import html_card, new_axes, plain, plotting, short_repr
from normlab._rng import as_seed_sequence, spawn

from .registry import MODELS, fit_family, fit_kind_names, fit_strategy
from .hierarchical import fit_hierarchical
from .inputs import StateCounts
from .logit import (DECAY_GRID, _check_counts, _check_pos_int, _folds, _heldout_ll, _resolve_decay, divergence_warning,
                    fit_logit, select_decay)
from .posterior import StrategyFit, posterior_predictive_check

__all__ = [
    "fit_logit",
    "fit_hierarchical",
    "fit_strategy",
    "select_decay",
    "posterior_predictive_check",
    "compare_models",
    "ModelComparison",
    "log_predictive_density",
    "MODELS",
    "DECAY_GRID",
    "divergence_warning",
]


def log_predictive_density(fit: StrategyFit, counts: StateCounts, *, n_draws: int = 400, rng=0) -> dict:
    """Log predictive density of new decisions under a fit (e.g. committed-minority runs for a
    fit on baseline runs): ``sum_s sum_n c[s, n] log E_post p(n | s)``.

    Parameters
    ----------
    fit : StrategyFit
    counts : StateCounts
        Test decisions (same names and memory).
    n_draws : int, optional
        Posterior draws averaged (ignored for a conjugate fit -- the empirical table -- whose mean
        is exact).
    rng : optional

    Returns
    -------
    dict
        ``lpd`` (total), ``per_decision``, ``decisions``, ``share_unseen`` (share of the test
        decisions in states the fit never saw) and ``lpd_unseen`` / ``lpd_seen``.
    """
    if not isinstance(fit, StrategyFit) or not isinstance(counts, StateCounts):
        raise TypeError("fit must be a StrategyFit and counts a StateCounts")
    if counts.names != fit.names or counts.memory != fit.memory:
        raise ValueError(f"counts are for names {counts.names}, H={counts.memory}; the fit for {fit.names}, H={fit.memory}")
    C = counts.counts
    P = fit.mean_table().table if fit.family.conjugate else fit.sample_tables(n_draws, rng=rng).mean(axis=0)
    ll = (C * np.log(np.clip(P, 1e-12, 1))).sum(axis=1)
    unseen = ~fit.observed
    tot = C.sum()
    return {"lpd": float(ll.sum()), "per_decision": float(ll.sum() / max(tot, 1)), "decisions": float(tot),
            "share_unseen": float(C[unseen].sum() / max(tot, 1)), "lpd_unseen": float(ll[unseen].sum()),
            "lpd_seen": float(ll[~unseen].sum())}


# ----------------------------------------------------------------------------- model comparison
@dataclass(frozen=True)
class ModelComparison:
    """Cross-validated comparison of strategy models.

    Attributes
    ----------
    by : str
        ``"run"`` (folds hold out whole runs) or ``"state"`` (folds hold out whole memory states).
    k : int
        Folds.
    folds : pandas.DataFrame
        One row per (model, fold): ``model``, ``fold``, ``heldout_ll``, ``n_test``.
    decay : float
        Feature decay used by the feature models.
    chosen : str
        Model with the largest total held-out log-likelihood.

    References
    ----------
    Gelman et al., Bayesian Data Analysis (2013), ch. 7; Vehtari, Gelman & Gabry, Stat. Comput. 27,
    1413 (2017) (standard error of the elpd difference).
    """

    by: str
    k: int
    folds: pd.DataFrame
    decay: float
    chosen: str
    per_decision: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per model: ``model``, ``heldout_ll`` (sum over folds), ``per_decision``,
        ``delta`` (difference to the best), ``delta_se`` (standard error of the difference over
        folds), ``rank``."""
        f = self.folds
        tot = f.groupby("model")["heldout_ll"].sum()
        nt = f.groupby("model")["n_test"].sum()
        best = tot.idxmax()
        wide = f.pivot(index="fold", columns="model", values="heldout_ll")
        rows = []
        for m in tot.index:
            diff = wide[m] - wide[best]
            se = float(np.sqrt(len(diff) * diff.var(ddof=1))) if len(diff) > 1 else float("nan")
            rows.append({"model": m, "heldout_ll": float(tot[m]), "per_decision": float(tot[m] / nt[m]),
                         "delta": float(tot[m] - tot[best]), "delta_se": se if m != best else 0.0})
        out = pd.DataFrame(rows).sort_values("heldout_ll", ascending=False).reset_index(drop=True)
        out["rank"] = np.arange(1, len(out) + 1)
        out.insert(0, "by", self.by)
        return out

    def summary(self) -> dict:
        """The chosen model and, per model, the held-out log-likelihood and its difference to
        the best with its standard error (plain Python)."""
        t = self.to_frame()
        return plain({"by": self.by, "k": self.k, "chosen": self.chosen, "decay": self.decay,
                      "models": {r["model"]: {"heldout_ll": r["heldout_ll"], "per_decision": r["per_decision"],
                                              "delta": r["delta"], "delta_se": r["delta_se"]} for _, r in t.iterrows()}})

    def __repr__(self) -> str:
        t = self.to_frame()
        ranks = ", ".join(f"{r['model']} {r['delta']:+.1f}" + (f" ± {r['delta_se']:.1f}" if r["delta_se"] else "")
                          for _, r in t.iterrows())
        return short_repr("ModelComparison", f"{self.k}-fold by {self.by}", f"chosen {self.chosen}",
                          f"held-out log-likelihood vs best: {ranks}")

    def _repr_html_(self) -> str:
        t = self.to_frame()
        rows = [(r["model"], r["delta"], (r["delta"] - 1.96 * r["delta_se"], r["delta"] + 1.96 * r["delta_se"])
                 if r["delta_se"] else None, f"held-out log-likelihood {r['heldout_ll']:.1f}")
                for _, r in t.iterrows()]
        return html_card("ModelComparison", rows, subtitle=f"{self.k}-fold cross-validation holding out whole "
                         f"{self.by}s; value = difference to the best", settings={"chosen": self.chosen,
                                                                                 "decay": self.decay},
                         note=".plot() draws the differences; .folds holds every fold.")

    @plotting
    def plot(self, *, ax=None):
        """Held-out log-likelihood of each model minus the best, with ±1.96 standard errors.

        Returns
        -------
        matplotlib.axes.Axes
        """
        t = self.to_frame()
        ax = new_axes(ax, (5.5, 0.5 * len(t) + 1.5))
        y = np.arange(len(t))[::-1]
        ax.errorbar(t["delta"], y, xerr=1.96 * t["delta_se"].fillna(0), fmt="o", capsize=3)
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set_yticks(y, list(t["model"]))
        ax.set(xlabel="held-out log-likelihood - best (±1.96 SE)",
               title=f"{self.k}-fold CV by {self.by}: chosen {self.chosen}")
        ax.title.set_fontsize(9)
        return ax

    @classmethod
    def _contract_example(cls) -> "ModelComparison":
        """Two models over three folds, literal held-out log-likelihoods (``tests/umbrella/test_contracts.py``)."""
        folds = pd.DataFrame({"model": ["empirical"] * 3 + ["logit"] * 3, "fold": [0, 1, 2] * 2,
                              "heldout_ll": [-50.0, -48.0, -52.0, -47.0, -47.5, -49.0], "n_test": [80, 78, 82] * 2})
        return cls(by="run", k=3, folds=folds, decay=0.5, chosen="logit")


def compare_models(counts: StateCounts, *, models=None, by: str = "run", k: int = 5, decay="auto",
                   draws: int = 500, tune: int = 500, chains: int = 2, cores: int = 2, n_pred_draws: int = 200,
                   rng=None) -> ModelComparison:
    """K-fold cross-validated log predictive density of strategy models.

    Parameters
    ----------
    counts : StateCounts
        Two-name counts with one group per run.
    models : sequence of str, optional
        Registered fit kinds to compare (default: every one,
        :func:`normlab.calibration.fit.registry.fit_kind_names`).
    by : {"run", "state"}, optional
        ``"run"``: each fold holds out whole runs (the decisions of new populations);
        ``"state"``: each fold holds out every decision in a subset of the non-empty observed
        states (prediction for memories never seen in training).
    k : int, optional
    decay : float or "auto", optional
        Chosen once on all data (``"auto"``: :func:`select_decay`) and used in every fold.
    draws, tune, chains, cores : int, optional
        NUTS settings per fold (smaller than for a final fit).
    n_pred_draws : int, optional
        Posterior draws of the table used for the predictive probability of held-out decisions
        (posterior mean of ``p(name | s)``).
    rng : optional

    Returns
    -------
    ModelComparison
    """
    _check_counts(counts)
    known = fit_kind_names()
    models = known if models is None else tuple(models)
    bad = set(models) - set(known)
    if bad:
        raise ValueError(f"unknown models {sorted(bad)}; choose from {known}")
    if by not in ("run", "state"):
        raise ValueError(f"by must be 'run' or 'state'; got {by!r}")
    k = _check_pos_int(k, "k", 2)
    d = _resolve_decay(counts, decay, rng)
    seeds = spawn(rng, 2)
    fold_seed = int(as_seed_sequence(seeds[0]).generate_state(1)[0])
    if by == "run":
        if len(counts.groups) < k:
            raise ValueError(f"by='run' needs at least k={k} runs; got {len(counts.groups)}")
        folds = _folds(len(counts.groups), k, fold_seed)
        all_g = np.arange(len(counts.groups))
        splits = [(counts.subset(np.setdiff1d(all_g, f)), counts.subset(f).counts) for f in folds]
    else:
        C = counts.counts
        states = np.flatnonzero((C.sum(axis=1) > 0) & (np.arange(len(C)) != 0))
        if len(states) < k:
            raise ValueError(f"by='state' needs at least k={k} observed non-empty states")
        folds = _folds(len(states), k, fold_seed)
        splits = []
        for f in folds:
            held = states[f]
            keep = ~np.isin(counts.group_state, held)
            train = StateCounts(counts.names, counts.memory, counts.groups, counts.group_index[keep],
                                counts.group_state[keep], counts.group_counts[keep], dict(counts.source))
            test = np.zeros_like(C)
            test[held] = C[held]
            splits.append((train, test))
    rows = []
    fit_seeds = spawn(seeds[1], len(models) * len(splits))
    j = 0
    for m in models:
        for i, (train, test) in enumerate(splits):
            # a conjugate family (the empirical table) ignores the sampler settings and is scored by
            # its exact posterior mean
            # the pooled models (no run effects): the comparison scores tables, not runs' effects
            fit = fit_strategy(train, m, decay=d, draws=draws, tune=tune, chains=chains, cores=cores,
                               rng=fit_seeds[j], **({"run_effects": False} if fit_family(m).uses_nuts else {}))
            j += 1
            if fit.family.conjugate:
                p1 = fit.mean_table().table[:, 1]
            else:
                p1 = fit.sample_tables(n_pred_draws, rng=fit_seeds[j - 1])[:, :, 1].mean(axis=0)
            rows.append({"model": m, "fold": i, "heldout_ll": _heldout_ll(p1, test), "n_test": float(test.sum())})
    f = pd.DataFrame(rows)
    tot = f.groupby("model")["heldout_ll"].sum()
    return ModelComparison(by=by, k=k, folds=f, decay=d, chosen=str(tot.idxmax()))
