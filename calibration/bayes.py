"""Bayesian strategy models in PyMC, their diagnostics, posterior predictive checks and selection.

Models for two names (``p = p(names[1] | s)``; counts aggregated per state, so the likelihood
costs one term per observed state):

``logit``
    ``logit p_s = x_s . beta`` on the memory features of :mod:`normlab.calibration.features`
    (relabelling-symmetric columns plus bias columns), ``beta_j ~ N(0, 5)``. Generalises to every
    state but is only as good as the features.
``logit_symmetric``
    The same with the bias columns removed: a strategy invariant under relabelling of the names,
    which can produce conventions but no collective bias (the null model of Flint Ashery et al. 2025, Table 1).
``hierarchical``
    ``logit p_s = x_s . beta + delta_s`` with a state effect ``delta_s ~ N(0, tau)`` for every
    non-empty state and ``tau ~ HalfNormal(2.5)``: partial pooling between the exact per-state
    estimate (many decisions: ``delta_s`` follows the data) and the feature model (few or none:
    ``delta_s`` shrinks to 0, and an unseen state draws ``delta ~ N(0, tau)``, so its
    uncertainty is as large as the model's typical misfit). The empty state has its own bias
    column and no ``delta``. States with more than 20 decisions use the centred
    parametrisation, the others the non-centred one (the sampler needs both: a thousand decisions
    pin ``delta_s`` down far more tightly than ``tau``).

Sampling uses PyMC's NUTS (``chains`` chains, one per core); diagnostics (R-hat, bulk/tail ESS,
divergences) come from ArviZ. :func:`compare_models` chooses among these models and the empirical
table by K-fold cross-validated log predictive density, holding out whole runs (or, with
``by="state"``, whole memory states -- the situation of a committed minority driving agents into
memories the training runs never showed).

Model choice (documented in the shipped tables' ``meta["model_selection"]``; 5 folds, baseline
runs only): holding out whole runs, ``hierarchical`` is best for every shipped setting
(Llama-3.1 Q/M H = 5: held-out log-likelihood -5081 vs -5272 for ``logit``, -5343 ``empirical``,
-5407 ``logit_symmetric``; Llama-3 H = 3: -1098 vs -1136 ``empirical``, -1445 ``logit``; Llama-3
H = 5: -1389 vs -1663 ``empirical``). Holding out whole states, ``logit`` (Llama-3.1) or
``logit_symmetric`` (Llama-3 H = 3) is ahead of ``hierarchical`` by less than one fold-to-fold
standard error, and ``empirical`` collapses (it can only say 1/2 there). ``hierarchical`` is the
default: it is the only model close to the best in both regimes, and it says how unsure it is
where data are thin.

PyMC, PyTensor and ArviZ are imported inside the functions, so ``import normlab.calibration``
stays light. PyTensor compiles C code on first use (cached in ``~/.pytensor``).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Figs.
S8-S10 (strategies by memory state, asymmetry under relabelling); A. Gelman et al., Bayesian Data
Analysis, 3rd ed. (2013), ch. 5 (hierarchical models) and ch. 7 (cross-validation);
A. Vehtari et al., Bayesian Analysis 16, 667 (2021) (rank-normalised R-hat and ESS).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import html_card, new_axes, plain, plotting, short_repr
from normlab._rng import as_seed_sequence, spawn

from .empirical import fit_empirical
from .features import COLUMNS, SYMMETRIC_COLUMNS, design_matrix
from .inputs import StateCounts, _state_tables
from .posterior import StrategyFit, _log_sigmoid, _sigmoid

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
]

MODELS = ("empirical", "logit_symmetric", "logit", "hierarchical")
#: Recency decays tried by :func:`select_decay`.
DECAY_GRID = (0.1, 0.3, 0.5, 0.7, 0.85, 1.0)
COEF_SD = 5.0
TAU_SD = 2.5
CENTRED_ABOVE = 20


def _check_counts(counts, what="counts"):
    if not isinstance(counts, StateCounts):
        raise TypeError(f"{what} must be a StateCounts; got {type(counts).__name__}")
    if counts.n_names != 2:
        raise ValueError(f"feature-based strategy models support two names only (W = 2); got W={counts.n_names}. "
                         f"Use fit_empirical for larger pools.")
    if counts.n_decisions <= 0:
        raise ValueError("no decision to fit on (all counts are zero)")


def _check_sampler(draws, tune, chains, cores, target_accept) -> None:
    """Validate NUTS settings before any work (shared by the PyMC fitters)."""
    for v, nm in ((draws, "draws"), (tune, "tune"), (chains, "chains"), (cores, "cores")):
        _check_pos_int(v, nm, 1 if nm != "tune" else 0)
    if not 0.5 <= float(target_accept) < 1:
        raise ValueError(f"target_accept must be in [0.5, 1); got {target_accept}")


def _check_pos_int(v, name, low=1):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{name} must be an int >= {low}; got {v!r}")
    return int(v)


def _columns(kind):
    return SYMMETRIC_COLUMNS if kind == "logit_symmetric" else COLUMNS


def _quiet():
    """Silence the chatty import-time and sampling warnings of PyTensor/ArviZ/PyMC."""
    warnings.filterwarnings("ignore", message=".*BLAS.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="arviz.*")
    warnings.filterwarnings("ignore", message=".*arviz.*migration.*")
    warnings.filterwarnings("ignore", message=".*ArviZ.*")


# ----------------------------------------------------------------------------- fast MAP (decay choice)
def _map_logit(X, k, n, sd=COEF_SD):
    """MAP of the feature-only logit with N(0, sd) priors (scipy L-BFGS)."""
    from scipy.optimize import minimize

    def f(b):
        eta = X @ b
        ll = k * _log_sigmoid(eta) + (n - k) * _log_sigmoid(-eta)
        p = _sigmoid(eta)
        g = X.T @ (k - n * p) - b / sd**2
        return -(ll.sum() - 0.5 * np.sum(b**2) / sd**2), -g

    res = minimize(f, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B")
    return res.x


def _heldout_ll(p1, counts_test):
    """Log predictive density of test counts under p(name 1 | s) = ``p1`` (per state)."""
    p1 = np.clip(p1, 1e-12, 1 - 1e-12)
    return float(np.sum(counts_test[:, 1] * np.log(p1) + counts_test[:, 0] * np.log1p(-p1)))


def _folds(n_groups, k, rng):
    g = np.random.default_rng(rng)
    perm = g.permutation(n_groups)
    return [np.sort(perm[i::k]) for i in range(k)]


def select_decay(counts: StateCounts, *, grid=DECAY_GRID, k: int = 5, rng=None) -> pd.DataFrame:
    """Held-out log-likelihood of the feature-only logit (MAP) for each recency decay.

    Folds hold out whole groups (runs). Cheap (no sampler): used to fix the feature decay before
    the Bayesian fits.

    Parameters
    ----------
    counts : StateCounts
    grid : sequence of float, optional
    k : int, optional
        Folds (at most the number of groups).
    rng : optional

    Returns
    -------
    pandas.DataFrame
        Columns ``decay``, ``heldout_ll``, ``per_decision``; the best decay is the row with the
        largest ``heldout_ll``.
    """
    _check_counts(counts)
    k = min(_check_pos_int(k, "k", 2), len(counts.groups))
    if k < 2:
        raise ValueError("decay selection needs at least two groups (runs)")
    folds = _folds(len(counts.groups), k, as_seed_sequence(rng).generate_state(1)[0])
    H = counts.memory
    rows = []
    for decay in grid:
        X = design_matrix(H, float(decay))
        tot, nd = 0.0, 0.0
        for test in folds:
            train = counts.subset(np.setdiff1d(np.arange(len(counts.groups)), test)).counts
            te = counts.subset(test).counts
            b = _map_logit(X, train[:, 1], train.sum(axis=1))
            tot += _heldout_ll(_sigmoid(X @ b), te)
            nd += te.sum()
        rows.append({"decay": float(decay), "heldout_ll": tot, "per_decision": tot / max(nd, 1)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- PyMC models
def _build_model(kind, X, k, n, state_ids):
    import pymc as pm
    import pytensor.tensor as pt

    cols = _columns(kind)
    Xc = X[:, [COLUMNS.index(c) for c in cols]]
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, COEF_SD, shape=len(cols))
        eta = pt.dot(Xc, beta)
        if kind == "hierarchical":
            tau = pm.HalfNormal("tau", TAU_SD)
            has_delta = state_ids != 0
            big = has_delta & (n > CENTRED_ABOVE)
            small = has_delta & ~big
            delta = pt.zeros(len(k))
            if small.any():
                z = pm.Normal("z", 0.0, 1.0, shape=int(small.sum()))
                delta = pt.set_subtensor(delta[np.flatnonzero(small)], tau * z)
            if big.any():
                dc = pm.Normal("delta_c", 0.0, tau, shape=int(big.sum()))
                delta = pt.set_subtensor(delta[np.flatnonzero(big)], dc)
            eta = eta + delta
        # binomial log-likelihood on (possibly fractional) aggregated counts
        pm.Potential("loglik", pt.sum(k * -pt.softplus(-eta) + (n - k) * -pt.softplus(eta)))
    return model, cols


def _diagnostics(idata, sampling_seconds):
    import arviz as az

    _quiet()
    rhat = az.rhat(idata)
    ess_b = az.ess(idata, method="bulk")
    ess_t = az.ess(idata, method="tail")

    def red(ds, fn, names=None):
        vals = [np.asarray(ds[v]).reshape(-1) for v in ds.data_vars if names is None or v in names]
        vals = [v for v in vals if v.size]
        return float(fn(np.concatenate(vals))) if vals else float("nan")

    glob = ("beta", "tau")
    st = idata.sample_stats
    return {
        "r_hat_max": red(rhat, np.nanmax),
        "ess_bulk_min": red(ess_b, np.nanmin),
        "ess_tail_min": red(ess_t, np.nanmin),
        "r_hat_max_global": red(rhat, np.nanmax, glob),
        "ess_bulk_min_global": red(ess_b, np.nanmin, glob),
        "divergences": int(np.asarray(st["diverging"]).sum()),
        "chains": int(idata.posterior.sizes["chain"]),
        "draws": int(idata.posterior.sizes["draw"]),
        "mean_tree_depth": float(np.asarray(st["tree_depth"]).mean()) if "tree_depth" in st else float("nan"),
        "sampling_seconds": float(sampling_seconds),
    }


def divergence_warning(diagnostics: dict) -> str | None:
    """One line saying how many NUTS transitions diverged (``None`` when none did)."""
    n = int(diagnostics.get("divergences") or 0)
    if n <= 0:
        return None
    total = int(diagnostics.get("chains", 0)) * int(diagnostics.get("draws", 0))
    of = f" of {total} draws" if total else ""
    return (f"the NUTS sampler reported {n} divergent transition{'s' if n > 1 else ''}{of}: the posterior may be "
            "biased where they occurred; refit with a higher target_accept (e.g. 0.95) or more tuning steps and "
            "check fit.diagnostics")


def _fit_pymc(kind, counts, *, decay, draws, tune, chains, cores, target_accept, rng, meta, return_idata,
              progress=False):
    import pymc as pm

    _quiet()
    X = design_matrix(counts.memory, decay)
    C = counts.counts
    n = C.sum(axis=1)
    obs = np.flatnonzero(n > 0)
    model, cols = _build_model(kind, X[obs], C[obs, 1], n[obs], obs)
    seeds = [int(s) for s in as_seed_sequence(rng).generate_state(chains)]
    t0 = time.perf_counter()
    with model, warnings.catch_warnings():
        _quiet()
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=min(cores, chains), random_seed=seeds,
                          target_accept=target_accept, progressbar=bool(progress), compute_convergence_checks=False)
    secs = time.perf_counter() - t0
    diag = _diagnostics(idata, secs)
    msg = divergence_warning(diag)
    if msg:
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
    post = idata.posterior
    beta = np.asarray(post["beta"]).reshape(-1, len(cols))
    coef = np.zeros((beta.shape[0], len(COLUMNS)))
    coef[:, [COLUMNS.index(c) for c in cols]] = beta
    tau = np.asarray(post["tau"]).reshape(-1) if kind == "hierarchical" else np.zeros(0)
    m = {"source": dict(counts.source), "groups": len(counts.groups), "draws": draws, "tune": tune,
         "chains": chains, "target_accept": target_accept, "coef_sd": COEF_SD, "tau_sd": TAU_SD,
         "centred_above": CENTRED_ABOVE}
    m.update(meta or {})
    fit = StrategyFit(kind=kind, names=counts.names, memory=counts.memory, counts=C, decay=float(decay),
                      coef_names=COLUMNS, coef_draws=coef, tau_draws=tau, diagnostics=diag, meta=m)
    return (fit, idata) if return_idata else fit


def _resolve_decay(counts, decay, rng):
    if decay is None or decay == "auto":
        tab = select_decay(counts, rng=rng) if len(counts.groups) >= 2 else None
        return 0.7 if tab is None else float(tab.loc[tab["heldout_ll"].idxmax(), "decay"])
    d = float(decay)
    if not 0.0 < d <= 1.0:
        raise ValueError(f"decay must be in (0, 1] or 'auto'; got {decay!r}")
    return d


def fit_logit(counts: StateCounts, *, symmetric: bool = False, decay="auto", draws: int = 1000, tune: int = 1000,
              chains: int = 2, cores: int = 2, target_accept: float = 0.9, rng=None, meta: dict | None = None,
              return_idata: bool = False, progress: bool = False):
    """Fit the feature-only logistic strategy (``logit``, or ``logit_symmetric``) with NUTS.

    Parameters
    ----------
    counts : StateCounts
        Two-name decision counts.
    symmetric : bool, optional
        Drop the bias columns (a relabelling-invariant strategy).
    decay : float or "auto", optional
        Feature recency decay; ``"auto"`` picks it from :data:`DECAY_GRID` by run-grouped
        held-out log-likelihood of the MAP fit (:func:`select_decay`).
    draws, tune, chains, cores : int, optional
        NUTS settings (``draws`` per chain).
    target_accept : float, optional
    rng : optional
        Seeds the chains.
    meta : dict, optional
    return_idata : bool, optional
        Also return the ArviZ ``InferenceData`` (then the result is a tuple).
    progress : bool, optional
        Show the sampler's progress bar. Divergent transitions always raise a ``RuntimeWarning``.

    Returns
    -------
    StrategyFit or (StrategyFit, arviz.InferenceData)

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Fig. S8.
    """
    _check_counts(counts)
    _check_sampler(draws, tune, chains, cores, target_accept)
    d = _resolve_decay(counts, decay, rng)
    return _fit_pymc("logit_symmetric" if symmetric else "logit", counts, decay=d, draws=draws, tune=tune,
                     chains=chains, cores=cores, target_accept=target_accept, rng=rng, meta=meta,
                     return_idata=return_idata, progress=progress)


def fit_hierarchical(counts: StateCounts, *, decay="auto", draws: int = 1000, tune: int = 1000, chains: int = 2,
                     cores: int = 2, target_accept: float = 0.9, rng=None, meta: dict | None = None,
                     return_idata: bool = False, progress: bool = False):
    """Fit the hierarchical strategy: feature logit plus partially pooled state effects (NUTS).

    Parameters
    ----------
    counts : StateCounts
        Two-name decision counts.
    decay, draws, tune, chains, cores, target_accept, rng, meta, return_idata, progress
        As for :func:`fit_logit`.

    Returns
    -------
    StrategyFit or (StrategyFit, arviz.InferenceData)
        ``kind="hierarchical"``; ``diagnostics`` holds R-hat, ESS and divergences over all
        parameters (and over ``beta``, ``tau`` alone: ``*_global``).

    Notes
    -----
    The fit keeps the draws of ``beta`` and ``tau`` only; tables are drawn by sampling each state
    effect from its exact conditional given them (:class:`~normlab.calibration.StrategyFit`).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Figs. S8-S10;
    Gelman et al., Bayesian Data Analysis (2013), ch. 5.
    """
    _check_counts(counts)
    _check_sampler(draws, tune, chains, cores, target_accept)
    d = _resolve_decay(counts, decay, rng)
    return _fit_pymc("hierarchical", counts, decay=d, draws=draws, tune=tune, chains=chains, cores=cores,
                     target_accept=target_accept, rng=rng, meta=meta, return_idata=return_idata,
                     progress=progress)


def fit_strategy(counts: StateCounts, model: str = "hierarchical", *, rng=None, **kwargs) -> StrategyFit:
    """Fit one of :data:`MODELS` by name (``"empirical"`` accepts ``prior=``; the others the
    keywords of :func:`fit_logit` / :func:`fit_hierarchical`).

    Returns
    -------
    StrategyFit
    """
    if model == "empirical":
        kw = {k: v for k, v in kwargs.items() if k in ("prior", "meta")}
        return fit_empirical(counts, **kw)
    if model in ("logit", "logit_symmetric"):
        return fit_logit(counts, symmetric=model == "logit_symmetric", rng=rng, **kwargs)
    if model == "hierarchical":
        return fit_hierarchical(counts, rng=rng, **kwargs)
    raise ValueError(f"model must be one of {MODELS}; got {model!r}")


# ----------------------------------------------------------------------------- posterior predictive checks
def posterior_predictive_check(fit: StrategyFit, counts: StateCounts | None = None, *, n_draws: int = 400,
                               level: float = 0.95, rng=None) -> pd.DataFrame:
    """Replicate the per-state counts from the posterior and compare with the observed ones.

    For every observed state, ``n_draws`` replicated counts of name 1 are drawn
    (``Binomial(n_s, p_s)`` with ``p_s`` from a posterior draw of the table); the observed count
    is compared with the central ``level`` interval and its posterior predictive p-value. The
    same is aggregated per memory length (the production of name 1 at the k-th move, as in the
    rows of Flint Ashery et al. 2025, Table 1).

    Parameters
    ----------
    fit : StrategyFit
    counts : StateCounts, optional
        Data to check against (default: the fit's training counts).
    n_draws : int, optional
    level : float, optional
    rng : optional

    Returns
    -------
    pandas.DataFrame
        One row per observed state (``scope="state"``) and per memory length
        (``scope="memory_len"``): ``scope``, ``state`` (index or -1), ``memory_state``,
        ``memory_len``, ``n``, ``observed`` (count of name 1), ``observed_freq``, ``pred_mean``
        (expected frequency), ``pred_low``, ``pred_high`` (interval of the replicated
        frequency), ``ppp`` (posterior predictive p-value ``P(rep >= obs)``), ``covered``.
    """
    if not isinstance(fit, StrategyFit):
        raise TypeError(f"fit must be a StrategyFit; got {type(fit).__name__}")
    C = fit.counts if counts is None else counts.counts
    if C.shape != fit.counts.shape:
        raise ValueError("counts must be for the fit's names and memory")
    g = np.random.default_rng(as_seed_sequence(rng))
    draws = fit.sample_tables(n_draws, rng=g)[:, :, -1]  # p(last name | s)
    n = C.sum(axis=1)
    obs = np.flatnonzero(n > 0)
    rep = g.binomial(np.round(n[obs]).astype(np.int64)[None, :], draws[:, obs])
    a = (1 - level) / 2
    labels = fit.to_frame(n_draws=2, rng=0).drop_duplicates("state")["memory_state"].to_numpy()
    _, lengths = _state_tables(fit.n_names, fit.memory)
    k = C[obs, -1]
    nn = np.maximum(np.round(n[obs]), 1)
    lo, hi = np.quantile(rep, [a, 1 - a], axis=0)
    rows = pd.DataFrame({
        "scope": "state", "state": obs, "memory_state": labels[obs], "memory_len": lengths[obs], "n": n[obs],
        "observed": k, "observed_freq": k / n[obs], "pred_mean": draws[:, obs].mean(axis=0),
        "pred_low": lo / nn, "pred_high": hi / nn,
        "ppp": (rep >= np.round(k)[None, :]).mean(axis=0),
    })
    rows["covered"] = (np.round(k) >= lo) & (np.round(k) <= hi)
    agg = []
    for L in np.unique(lengths[obs]):
        m = lengths[obs] == L
        r = rep[:, m].sum(axis=1)
        tot = n[obs][m].sum()
        ob = k[m].sum()
        ql, qh = np.quantile(r, [a, 1 - a])
        agg.append({"scope": "memory_len", "state": -1, "memory_state": None, "memory_len": int(L), "n": tot,
                    "observed": ob, "observed_freq": ob / tot, "pred_mean": r.mean() / tot, "pred_low": ql / tot,
                    "pred_high": qh / tot, "ppp": float((r >= np.round(ob)).mean()),
                    "covered": bool(ql <= np.round(ob) <= qh)})
    return pd.concat([rows, pd.DataFrame(agg)], ignore_index=True)


def log_predictive_density(fit: StrategyFit, counts: StateCounts, *, n_draws: int = 400, rng=0) -> dict:
    """Log predictive density of new decisions under a fit (e.g. committed-minority runs for a
    fit on baseline runs): ``sum_s sum_n c[s, n] log E_post p(n | s)``.

    Parameters
    ----------
    fit : StrategyFit
    counts : StateCounts
        Test decisions (same names and memory).
    n_draws : int, optional
        Posterior draws averaged (ignored for the empirical fit, whose mean is exact).
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
    P = fit.mean_table().table if fit.kind == "empirical" else fit.sample_tables(n_draws, rng=rng).mean(axis=0)
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


def compare_models(counts: StateCounts, *, models=MODELS, by: str = "run", k: int = 5, decay="auto",
                   draws: int = 500, tune: int = 500, chains: int = 2, cores: int = 2, n_pred_draws: int = 200,
                   rng=None) -> ModelComparison:
    """K-fold cross-validated log predictive density of strategy models.

    Parameters
    ----------
    counts : StateCounts
        Two-name counts with one group per run.
    models : sequence of str, optional
        Subset of :data:`MODELS`.
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
    models = tuple(models)
    bad = set(models) - set(MODELS)
    if bad:
        raise ValueError(f"unknown models {sorted(bad)}; choose from {MODELS}")
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
            fit = fit_strategy(train, m, decay=d, draws=draws, tune=tune, chains=chains, cores=cores,
                               rng=fit_seeds[j]) if m != "empirical" else fit_empirical(train)
            j += 1
            if m == "empirical":
                p1 = fit.mean_table().table[:, 1]
            else:
                p1 = fit.sample_tables(n_pred_draws, rng=fit_seeds[j - 1])[:, :, 1].mean(axis=0)
            rows.append({"model": m, "fold": i, "heldout_ll": _heldout_ll(p1, test), "n_test": float(test.sum())})
    f = pd.DataFrame(rows)
    tot = f.groupby("model")["heldout_ll"].sum()
    return ModelComparison(by=by, k=k, folds=f, decay=d, chosen=str(tot.idxmax()))
