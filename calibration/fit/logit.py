"""The feature logit family (fit kinds ``logit`` and ``logit_symmetric``), fitted with PyMC's NUTS.

For two names (``p = p(names[1] | s)``; counts aggregated per state, so the likelihood costs one
term per observed state):

``logit``
    ``logit p_s = x_s . beta`` on the memory features of :mod:`normlab.calibration.fit.features`
    (relabelling-symmetric columns plus bias columns), ``beta_j ~ N(0, 5)``. Generalises to every
    state but is only as good as the features.
``logit_symmetric``
    The same with the bias columns removed: a strategy invariant under relabelling of the names,
    which can produce conventions but no collective bias (the null model of Flint Ashery et al.
    2025, Table 1).

A fit keeps the posterior draws of ``beta``; a draw of the table is ``sigmoid(X @ beta)``. This
module also holds what every NUTS-fitted family shares (:mod:`normlab.calibration.fit.hierarchical`
extends :class:`LogitFamily`): the sampler settings and their checks, the diagnostics (R-hat,
bulk/tail ESS, divergences, from ArviZ) and the choice of the feature decay by held-out
log-likelihood of the MAP fit (:func:`select_decay`).

PyMC, PyTensor and ArviZ are imported inside the functions, so ``import normlab.calibration``
stays light. PyTensor compiles C code on first use (cached in ``~/.pytensor``).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Figs.
S8-S10 (strategies by memory state, asymmetry under relabelling); A. Vehtari et al., Bayesian
Analysis 16, 667 (2021) (rank-normalised R-hat and ESS).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import time
import warnings

import numpy as np
import pandas as pd

from normlab._rng import as_seed_sequence

from .features import COLUMN_MEANINGS, COLUMNS, SYMMETRIC_COLUMNS, design_matrix, to_logit_strategy
from .inputs import StateCounts
from .posterior import FitFamily, FitParams, StrategyFit

__all__ = ["LogitFamily", "LogitParams", "LOGIT", "LOGIT_SYMMETRIC", "fit_logit", "select_decay", "divergence_warning",
           "DECAY_GRID"]

#: Recency decays tried by :func:`select_decay`.
DECAY_GRID = (0.1, 0.3, 0.5, 0.7, 0.85, 1.0)
COEF_SD = 5.0
TAU_SD = 2.5
CENTRED_ABOVE = 20
#: Scale of the half-normal prior on the run effects' standard deviations (the joint model).
RE_SD_PRIOR = 1.0


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


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


def _quiet():
    """Silence the chatty import-time and sampling warnings of PyTensor/ArviZ/PyMC."""
    warnings.filterwarnings("ignore", message=".*BLAS.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="arviz.*")
    # (?s): ArviZ's messages can start with a newline, which a plain ".*" does not cross
    warnings.filterwarnings("ignore", message="(?s).*arviz.*migration.*")
    warnings.filterwarnings("ignore", message="(?s).*ArviZ.*")


def import_pymc():
    """``pymc``, imported without the notices its first import may print: ArviZ (which PyMC
    imports) warns on the first import of each day that it "is undergoing a major refactor" -- a
    FutureWarning the CLI would print as a second line beside a one-line result or error.
    Every module of normlab imports PyMC through this function."""
    with warnings.catch_warnings():
        _quiet()
        import pymc
    return pymc


def import_arviz():
    """``arviz``, imported as :func:`import_pymc` imports PyMC (its daily notice silenced)."""
    with warnings.catch_warnings():
        _quiet()
        import arviz
    return arviz


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


def _resolve_decay(counts, decay, rng):
    if decay is None or decay == "auto":
        tab = select_decay(counts, rng=rng) if len(counts.groups) >= 2 else None
        return 0.7 if tab is None else float(tab.loc[tab["heldout_ll"].idxmax(), "decay"])
    d = float(decay)
    if not 0.0 < d <= 1.0:
        raise ValueError(f"decay must be in (0, 1] or 'auto'; got {decay!r}")
    return d


# ----------------------------------------------------------------------------- sampler diagnostics
def _diagnostics(idata, sampling_seconds):
    az = import_arviz()
    _quiet()
    rhat = az.rhat(idata)
    ess_b = az.ess(idata, method="bulk")
    ess_t = az.ess(idata, method="tail")

    def red(ds, fn, names=None):
        vals = [np.asarray(ds[v]).reshape(-1) for v in ds.data_vars if names is None or v in names]
        vals = [v for v in vals if v.size]
        return float(fn(np.concatenate(vals))) if vals else float("nan")

    glob = ("beta", "tau", "sd_b", "sd_k", "re_chol_stds")
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


# ----------------------------------------------------------------------------- the family
@dataclass(frozen=True)
class LogitParams(FitParams):
    """The parameters of a ``logit`` / ``logit_symmetric`` fit: the features' recency ``decay``, the
    coefficient names and their posterior draws (``coef_draws``, shape ``(D, len(coef_names))``; checked
    against each other by :meth:`LogitFamily.check`)."""

    decay: float = float("nan")
    coef_names: tuple = ()
    coef_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


class LogitFamily(FitFamily):
    """``logit p_s = x_s . beta``: posterior draws of the feature coefficients, a table draw is
    ``sigmoid(X @ beta)`` (``symmetric``: the bias columns fixed at 0).

    Feature-based fits cycle through their stored coefficient draws (in a random order) when more
    tables are asked than stored; the posterior mean is exact (the mean over the stored draws).
    """

    exact_mean = True
    features = True
    two_names_only = True
    uses_nuts = True
    Params = LogitParams

    def __init__(self, kind: str = "logit", symmetric: bool = False):
        self.kind = kind
        self.symmetric = bool(symmetric)

    @property
    def columns(self) -> tuple:
        """The coefficients sampled (the others are 0)."""
        return SYMMETRIC_COLUMNS if self.symmetric else COLUMNS

    def fit(self, counts, *, rng=None, **kwargs) -> StrategyFit:
        return fit_logit(counts, symmetric=self.symmetric, rng=rng, **kwargs)

    def check(self, fit) -> None:
        cd = fit.coef_draws
        if fit.n_names != 2:
            raise ValueError("feature-based strategy models support two names only (W = 2)")
        if cd.ndim != 2 or cd.shape[0] == 0 or cd.shape[1] != len(fit.coef_names):
            raise ValueError("coef_draws must be (draws, len(coef_names)) with at least one draw")

    # ----------------------------------------------------------------- draws
    def sample_tables(self, fit, n_draws: int, g) -> np.ndarray:
        return self.sample_tables_indexed(fit, n_draws, g)[0]

    def sample_tables_indexed(self, fit, n_draws: int, g):
        """The table draws and the stored draw each one is (cycled through in a random order): a
        joint fit's run effects are paired with its table draws by this index."""
        S = fit.counts.shape[0]
        D = fit.coef_draws.shape[0]
        order = np.concatenate([g.permutation(D) for _ in range(-(-n_draws // D))])[:n_draws]
        X = fit.design()
        out = np.empty((n_draws, S, 2))
        # all draws at once
        eta = self._with_state_effects(fit, fit.coef_draws[order] @ X.T, order, g)
        p1 = _sigmoid(eta)
        out[:, :, 1] = p1
        out[:, :, 0] = 1.0 - p1
        return out, order

    def _with_state_effects(self, fit, eta, order, g):
        """The log-odds of every draw and state (the feature model has no state effect)."""
        return eta

    def mean_table(self, fit, n_draws: int, rng) -> np.ndarray:
        p1 = _sigmoid(fit.coef_draws @ fit.design().T).mean(axis=0)
        return np.column_stack([1 - p1, p1])

    def empty_memory(self, fit):
        # the empty memory has no state effect: its mean is the features' alone
        p1 = float(_sigmoid(fit.coef_draws @ fit.design()[0]).mean())
        return (1.0 - p1, p1)

    # ----------------------------------------------------------------- description
    def coef_frame(self, fit, level: float) -> pd.DataFrame:
        return pd.DataFrame(self._coef_rows(fit, (1 - level) / 2))

    def _coef_rows(self, fit, a) -> list:
        rows = []
        for j, nm in enumerate(fit.coef_names):
            x = fit.coef_draws[:, j]
            rows.append({"parameter": nm, "kind": "symmetric" if nm.startswith("sym_") else "bias",
                         "mean": x.mean(), "sd": x.std(), "low": np.quantile(x, a), "high": np.quantile(x, 1 - a),
                         "meaning": COLUMN_MEANINGS.get(nm, "")})
        return rows

    def to_logit_strategy(self, fit):
        return to_logit_strategy(fit.coef_draws.mean(axis=0), fit.decay)

    def thin(self, fit, n: int):
        D = fit.coef_draws.shape[0]
        keep = np.linspace(0, D - 1, min(n, D)).round().astype(int)
        kept = {k: getattr(fit.params, k)[keep] for k in ("coef_draws", "tau_draws", "delta_draws")
                if k in fit.params.names() and np.size(getattr(fit.params, k))}
        meta = {**fit.meta, "draws_kept": int(len(keep))}
        re = meta.get("run_effects")
        if isinstance(re, dict) and re.get("kind") == "joint" and re.get("sample"):
            # the joint posterior's effects, paired with the table draws: thinned alike
            meta["run_effects"] = {**re, "sample": [re["sample"][i] for i in keep]}
        return dataclasses.replace(fit, params=dataclasses.replace(fit.params, **kept), meta=meta)

    # ----------------------------------------------------------------- NUTS
    def _build_model(self, X, k, n, state_ids, rows=None, correlated=False):
        """The model on the observed states' features ``X``, counts ``k`` of name 1 of ``n``.

        Without ``rows``: the pooled likelihood on the aggregated counts. With ``rows = (run, pos, k1,
        k0)`` -- one row per (run, observed state) -- every run ``r`` plays the table under its own
        effect, ``logit p_r(s) = kappa_r * logit p(s) + b_r``, ``b_r = sd_b zb_r``,
        ``log kappa_r = sd_k zk_r`` (non-centred, mean zero: the table is the median run's),
        ``sd_b, sd_k ~ HalfNormal(1)``; ``correlated``: ``(b, log kappa)`` with an LKJ(2) correlation."""
        pm = import_pymc()
        import pytensor.tensor as pt

        cols = self.columns
        Xc = X[:, [COLUMNS.index(c) for c in cols]]
        with pm.Model() as model:
            beta = pm.Normal("beta", 0.0, COEF_SD, shape=len(cols))
            eta = self._model_state_effects(pt.dot(Xc, beta), k, n, state_ids)
            if rows is None:
                # binomial log-likelihood on (possibly fractional) aggregated counts
                pm.Potential("loglik", pt.sum(k * -pt.softplus(-eta) + (n - k) * -pt.softplus(eta)))
            else:
                run, pos, k1, k0 = rows
                R = int(run.max()) + 1
                if correlated:
                    chol, _, _ = pm.LKJCholeskyCov("re_chol", n=2, eta=2.0, compute_corr=True,
                                                   sd_dist=pm.HalfNormal.dist(RE_SD_PRIOR, shape=2))
                    zz = pm.Normal("re_z", 0.0, 1.0, shape=(R, 2))
                    e = pt.dot(zz, chol.T)
                    b, lk = e[:, 0], e[:, 1]
                else:
                    sd_b = pm.HalfNormal("sd_b", RE_SD_PRIOR)
                    sd_k = pm.HalfNormal("sd_k", RE_SD_PRIOR)
                    b = sd_b * pm.Normal("re_zb", 0.0, 1.0, shape=R)
                    lk = sd_k * pm.Normal("re_zk", 0.0, 1.0, shape=R)
                er = pt.exp(lk)[run] * eta[pos] + b[run]
                pm.Potential("loglik", pt.sum(k1 * -pt.softplus(-er) + k0 * -pt.softplus(er)))
        return model, cols

    def _model_state_effects(self, eta, k, n, state_ids):
        """The model's log-odds given the features' (inside the model context; none here)."""
        return eta

    def _tau_draws(self, posterior) -> np.ndarray:
        return np.zeros(0)

    def _delta_draws(self, posterior, k, n, state_ids):
        """Per draw the state effects of the observed states (``(states, draws)``; the feature model:
        none)."""
        return None

    def _fit_nuts(self, counts, *, decay, sampler: dict, rng, meta, return_idata, run_effects=True):
        """The NUTS fit: ``sampler`` holds ``draws``, ``tune``, ``chains``, ``cores``, ``target_accept``,
        ``progress``; ``run_effects``: True (independent run effects in the model), ``"correlated"``
        (with an LKJ(2) correlation) or False (the pooled model)."""
        pm = import_pymc()

        draws, tune, chains, cores = sampler["draws"], sampler["tune"], sampler["chains"], sampler["cores"]
        target_accept, progress = sampler["target_accept"], sampler.get("progress", False)
        correlated = run_effects == "correlated"
        _quiet()
        X = design_matrix(counts.memory, decay)
        C = counts.counts
        n = C.sum(axis=1)
        obs = np.flatnonzero(n > 0)
        rows = _run_rows(counts, obs) if run_effects else None
        model, cols = self._build_model(X[obs], C[obs, 1], n[obs], obs, rows=rows, correlated=bool(correlated))
        seeds = [int(s) for s in as_seed_sequence(rng).generate_state(chains)]
        t0 = time.perf_counter()
        with model, warnings.catch_warnings():
            _quiet()
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=min(cores, chains), random_seed=seeds,
                              target_accept=target_accept, progressbar=bool(progress),
                              compute_convergence_checks=False)
        secs = time.perf_counter() - t0
        diag = _diagnostics(idata, secs)
        msg = divergence_warning(diag)
        if msg:
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
        post = idata.posterior
        beta = np.asarray(post["beta"]).reshape(-1, len(cols))
        coef = np.zeros((beta.shape[0], len(COLUMNS)))
        coef[:, [COLUMNS.index(c) for c in cols]] = beta
        tau = self._tau_draws(post)
        m = {"source": dict(counts.source), "groups": len(counts.groups), "draws": draws, "tune": tune,
             "chains": chains, "target_accept": target_accept, "coef_sd": COEF_SD, "tau_sd": TAU_SD,
             "centred_above": CENTRED_ABOVE}
        m.update(meta or {})
        extra = {"tau_draws": tau} if "tau_draws" in self.Params.names() else {}
        if rows is not None:
            m["run_effects_model"] = {"kind": "joint", "sd_prior": RE_SD_PRIOR, "correlated": bool(correlated),
                                      "runs": int(rows[0].max()) + 1, "rows": int(len(rows[0]))}
            deltas = self._delta_draws(post, C[obs, 1], n[obs], obs)
            if deltas is not None:
                extra.update(delta_states=deltas[0], delta_draws=deltas[1])
        params = self.Params(decay=float(decay), coef_names=COLUMNS, coef_draws=coef, **extra)
        fit = StrategyFit(kind=self.kind, names=counts.names, memory=counts.memory, counts=C, params=params,
                          diagnostics=diag, meta=m)
        if rows is not None:
            from .run_effects import joint_run_effects

            sd = _effect_draws(post, bool(correlated))
            fit = dataclasses.replace(fit, meta={**fit.meta, "run_effects": joint_run_effects(
                fit, counts, sd).to_dict()})
        return (fit, idata) if return_idata else fit


def _run_rows(counts, obs):
    """``(run, pos, k1, k0)``: one row per (run, observed state) of the counts, ``pos`` the state's place
    among the observed states ``obs`` (the joint model's likelihood), or None with fewer than
    :data:`~normlab.calibration.fit.run_effects.MIN_RUNS` runs (the pooled model then)."""
    from .run_effects import MIN_RUNS

    gi = np.asarray(counts.group_index, np.int64)
    runs, run = np.unique(gi, return_inverse=True)
    if len(runs) < MIN_RUNS:
        return None
    c = np.asarray(counts.group_counts, float)
    keep = c.sum(axis=1) > 0
    where = np.full(counts.counts.shape[0], -1, np.int64)
    where[obs] = np.arange(len(obs))
    pos = where[np.asarray(counts.group_state, np.int64)[keep]]
    return run[keep].astype(np.int64), pos, c[keep, 1], c[keep, 0]


def _effect_draws(posterior, correlated: bool) -> np.ndarray:
    """Posterior draws ``(sd_b, sd_k, rho)`` of the joint model's run effects (chains flattened, in the
    order of the coefficient draws)."""
    if correlated:
        sds = np.asarray(posterior["re_chol_stds"]).reshape(-1, 2)
        rho = np.asarray(posterior["re_chol_corr"]).reshape(-1, 2, 2)[:, 0, 1]
        return np.column_stack([sds, rho])
    sb = np.asarray(posterior["sd_b"]).reshape(-1)
    sk = np.asarray(posterior["sd_k"]).reshape(-1)
    return np.column_stack([sb, sk, np.zeros_like(sb)])


LOGIT = LogitFamily("logit")
LOGIT_SYMMETRIC = LogitFamily("logit_symmetric", symmetric=True)


def fit_logit(counts: StateCounts, *, symmetric: bool = False, decay="auto", draws: int = 1000, tune: int = 1000,
              chains: int = 2, cores: int = 2, target_accept: float = 0.9, rng=None, meta: dict | None = None,
              return_idata: bool = False, progress: bool = False, run_effects=True):
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
    run_effects : bool or "correlated", optional
        Fit the run effects in the model (default; from three runs on): every run plays the table
        under its own shift and sharpness, sampled with it (non-centred, mean zero, half-normal
        standard deviations), and the fit's ``meta["run_effects"]`` holds their posterior draws,
        paired with the table draws (:class:`~normlab.calibration.RunEffects`, kind ``"joint"``).
        ``"correlated"``: shift and sharpness correlated (an LKJ(2) prior) instead of independent.
        False: the pooled model (every run the same table).

    Returns
    -------
    StrategyFit or (StrategyFit, arviz.InferenceData)

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Fig. S8; Gelman &
    Hill (2007), ch. 14 (varying-intercept, varying-slope logistic models).
    """
    _check_counts(counts)
    _check_sampler(draws, tune, chains, cores, target_accept)
    _check_run_effects(run_effects)
    d = _resolve_decay(counts, decay, rng)
    return (LOGIT_SYMMETRIC if symmetric else LOGIT)._fit_nuts(
        counts, decay=d, sampler=dict(draws=draws, tune=tune, chains=chains, cores=cores, target_accept=target_accept,
                                      progress=progress), rng=rng, meta=meta, return_idata=return_idata,
        run_effects=run_effects)


def _check_run_effects(value) -> None:
    if not (isinstance(value, (bool, np.bool_)) or value == "correlated"):
        raise ValueError(f"run_effects must be True, False or 'correlated'; got {value!r}")
