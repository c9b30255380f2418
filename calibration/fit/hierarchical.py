"""The hierarchical family (fit kind ``hierarchical``): the feature logit plus partially pooled state effects.

``logit p_s = x_s . beta + delta_s`` with a state effect ``delta_s ~ N(0, tau)`` for every
non-empty state and ``tau ~ HalfNormal(2.5)``: partial pooling between the exact per-state
estimate (many decisions: ``delta_s`` follows the data) and the feature model (few or none:
``delta_s`` shrinks to 0, and an unseen state draws ``delta ~ N(0, tau)``, so its uncertainty is
as large as the model's typical misfit). The empty state has its own bias column and no
``delta``. States with more than 20 decisions use the centred parametrisation, the others the
non-centred one (the sampler needs both: a thousand decisions pin ``delta_s`` down far more
tightly than ``tau``). Sampling is NUTS, as for :mod:`normlab.calibration.fit.logit`.

A fit keeps the posterior draws of ``beta`` and ``tau`` plus the counts. Given ``(beta, tau)``
the state effects ``delta_s`` are independent, each with density
``N(delta; 0, tau) * Binomial(counts_s | sigmoid(x_s beta + delta))``; a table draw samples each
``delta_s`` from that one-dimensional conditional (:func:`conditional_deltas`: numerical inverse
CDF on a 161-point grid spanning +-10 Laplace standard deviations around its mode). This is an
exact draw from the joint posterior (up to the grid), and an unseen state draws
``delta ~ N(0, tau)``: where data are thin the table is as uncertain as the data warrant. It is
also what makes a fit small enough to ship (:func:`normlab.calibration.load_fit`).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Figs.
S8-S10; A. Gelman et al., Bayesian Data Analysis, 3rd ed. (2013), ch. 5 (hierarchical models).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .inputs import StateCounts
from .logit import (CENTRED_ABOVE, TAU_SD, LogitFamily, LogitParams, _check_counts, _check_run_effects,
                    _check_sampler, _log_sigmoid, _resolve_decay, _sigmoid, import_pymc)
from .posterior import StrategyFit

__all__ = ["HierarchicalFamily", "HierarchicalParams", "HIERARCHICAL", "fit_hierarchical", "conditional_deltas"]

_GRID = 161
_GRID_HALF_WIDTH = 10.0
_CHUNK = 4_000_000  # grid cells per block of conditional draws (about 32 MB per array)


# ----------------------------------------------------------------------------- conditional draws of the state effects
def conditional_deltas(mu, k, n, tau, u):
    """Draw state effects from their one-dimensional conditionals (vectorised over states, and
    over draws when ``tau`` is an array).

    Parameters
    ----------
    mu : numpy.ndarray
        Feature-model log-odds ``x_s beta`` per state.
    k, n : numpy.ndarray
        Counts of name 1 and decisions per state (may be fractional).
    tau : float or numpy.ndarray
        State-effect scale (one per element of ``mu`` if an array).
    u : numpy.ndarray
        Uniform draws, one per state.

    Returns
    -------
    numpy.ndarray
        ``delta_s`` draws.
    """
    mu, k, n, u = (np.ascontiguousarray(a, dtype=float).reshape(-1) for a in (mu, k, n, u))
    tau = np.ascontiguousarray(np.broadcast_to(np.asarray(tau, dtype=float), mu.shape))
    out = np.empty_like(mu)
    _conditional_deltas_kernel()(mu, k, n, tau, u, out)
    return out


def _conditional_deltas_reference(mu, k, n, tau, u):
    """The former :func:`conditional_deltas`: :func:`_conditional_deltas` on blocks of states
    (kept as the reference of the compiled loop, and for ``benchmarks/bench_calibration.py``)."""
    mu, k, n, u = (np.asarray(a, dtype=float) for a in (mu, k, n, u))
    tau = np.broadcast_to(np.asarray(tau, dtype=float), mu.shape)
    out = np.empty_like(mu)
    step = max(1, _CHUNK // _GRID)
    for a in range(0, mu.size, step):
        sl = slice(a, a + step)
        out[sl] = _conditional_deltas(mu[sl], k[sl], n[sl], tau[sl], u[sl])
    return out


_CD_KERNEL = []


def _conditional_deltas_kernel():
    """:func:`_conditional_deltas_loop` compiled (on first use: ``import`` stays free of Numba)."""
    if not _CD_KERNEL:
        from normlab._jit import njit

        _CD_KERNEL.append(njit(cache=True)(_conditional_deltas_loop))
    return _CD_KERNEL[0]


def _conditional_deltas_loop(mu, k, n, tau, u, out):
    """One state at a time, the algorithm of :func:`_conditional_deltas` (each state's Newton
    iteration stops when *it* has converged; the vectorised one iterates until all have, so
    the two agree to about 1e-10)."""
    G = _GRID
    z = np.linspace(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH, G)
    grid = np.empty(G)
    logf = np.empty(G)
    cdf = np.empty(G)
    for i in range(mu.shape[0]):
        m, kk, nn, t2 = mu[i], k[i], n[i], tau[i] ** 2
        lo = -(abs(m) + 60.0 + 20.0 * tau[i])
        hi = -lo
        d = 0.0
        for _ in range(200):
            s = 0.5 * (1.0 + np.tanh(0.5 * (m + d)))
            g = kk - nn * s - d / t2
            if g > 0:
                lo = d
            else:
                hi = d
            h = nn * s * (1 - s) + 1 / t2
            new = d + g / h
            if new <= lo or new >= hi:
                new = 0.5 * (lo + hi)
            if abs(new - d) < 1e-10:
                d = new
                break
            d = new
        s = 0.5 * (1.0 + np.tanh(0.5 * (m + d)))
        sd = 1.0 / np.sqrt(nn * s * (1 - s) + 1 / t2)
        # exp(-|eta_j|) on the grid (eta_j = mu + d + sd z_j, z_j = -10 + j/8 exactly) by two
        # geometric runs from the grid points either side of eta = 0: one exp per state instead
        # of one per point (relative error ~1e-14)
        for j in range(G):
            grid[j] = d + sd * z[j]
        j0 = 0
        while j0 < G and m + grid[j0] < 0.0:
            j0 += 1
        r = np.exp(-sd * (z[1] - z[0]))
        e = 0.0
        for j in range(j0 - 1, -1, -1):
            e = np.exp(m + grid[j]) if j == j0 - 1 else e * r
            logf[j] = e
        for j in range(j0, G):
            e = np.exp(-(m + grid[j])) if j == j0 else e * r
            logf[j] = e
        top = -np.inf
        for j in range(G):
            gr = grid[j]
            eta = m + gr
            # log s(eta) = -logaddexp(0, -eta) = -(max(0, -eta) + log1p(exp(-|eta|)))
            ls = -(max(0.0, -eta) + np.log1p(logf[j]))
            v = nn * ls - (nn - kk) * eta - gr * gr / (2 * t2)
            logf[j] = v
            if v > top:
                top = v
        cdf[0] = 0.0
        prev = np.exp(logf[0] - top)
        for j in range(1, G):
            f = np.exp(logf[j] - top)
            cdf[j] = cdf[j - 1] + 0.5 * (f + prev)
            prev = f
        tot = cdf[G - 1]
        uu = u[i] * tot  # compare unnormalised: cdf_j / tot < u  <=>  cdf_j < u tot
        jj = 0
        for j in range(G):
            if cdf[j] < uu:
                jj += 1
        jj = min(max(jj, 1), G - 1)
        c0, c1 = cdf[jj - 1], cdf[jj]
        w = (uu - c0) / (c1 - c0) if c1 > c0 else 0.0
        out[i] = grid[jj - 1] + min(max(w, 0.0), 1.0) * (grid[jj] - grid[jj - 1])


def _conditional_deltas(mu, k, n, tau, u):
    # Mode of the concave log density k log s(mu+d) + (n-k) log s(-mu-d) - d^2 / (2 tau^2):
    # Newton steps safeguarded by a bisection bracket (the gradient is decreasing in d).
    lo = -(np.abs(mu).max(initial=0.0) + 60.0 + 20.0 * tau)
    hi = -lo
    d = np.zeros_like(mu)
    t2 = tau**2
    for _ in range(200):
        s = _sigmoid(mu + d)
        g = k - n * s - d / t2
        lo = np.where(g > 0, d, lo)
        hi = np.where(g <= 0, d, hi)
        h = n * s * (1 - s) + 1 / t2
        new = d + g / h
        outside = (new <= lo) | (new >= hi)
        new = np.where(outside, 0.5 * (lo + hi), new)
        if np.max(np.abs(new - d), initial=0.0) < 1e-10:
            d = new
            break
        d = new
    s = _sigmoid(mu + d)
    sd = 1.0 / np.sqrt(n * s * (1 - s) + 1 / t2)
    z = np.linspace(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH, _GRID)
    grid = d[:, None] + sd[:, None] * z[None, :]
    eta = mu[:, None] + grid
    # k log s(eta) + (n - k) log s(-eta), with log s(-eta) = log s(eta) - eta
    logf = n[:, None] * _log_sigmoid(eta) - (n - k)[:, None] * eta - grid**2 / (2 * t2[:, None])
    logf -= logf.max(axis=1, keepdims=True)
    f = np.exp(logf)
    cdf = np.concatenate([np.zeros((len(d), 1)), np.cumsum(0.5 * (f[:, 1:] + f[:, :-1]), axis=1)], axis=1)
    cdf /= cdf[:, -1:]
    # linear interpolation of the inverse cdf at u, row by row (np.interp, vectorised)
    j = np.clip(np.sum(cdf < u[:, None], axis=1), 1, _GRID - 1)
    r = np.arange(len(d))
    c0, c1 = cdf[r, j - 1], cdf[r, j]
    g0, g1 = grid[r, j - 1], grid[r, j]
    w = np.where(c1 > c0, (u - c0) / np.where(c1 > c0, c1 - c0, 1.0), 0.0)
    return g0 + np.clip(w, 0.0, 1.0) * (g1 - g0)


# ----------------------------------------------------------------------------- the family
@dataclass(frozen=True)
class HierarchicalParams(LogitParams):
    """The parameters of a ``hierarchical`` fit: those of the feature logit (:class:`LogitParams`), the
    posterior draws of the state-effect scale (``tau_draws``, one positive draw per coefficient draw;
    checked by :meth:`HierarchicalFamily.check`) and -- for a fit with run effects in the model, whose
    state effects have no one-dimensional conditional on aggregated counts -- the posterior draws of
    the observed states' effects (``delta_states``, ``delta_draws`` of shape ``(draws, states)``;
    stored in a fit document as 16-bit quantiles per state, compressed)."""

    tau_draws: np.ndarray = field(default_factory=lambda: np.zeros(0))
    delta_states: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    delta_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def __post_init__(self):
        super().__post_init__()
        st = np.asarray(self.delta_states, np.int64).reshape(-1)
        dd = np.asarray(self.delta_draws, float)
        if dd.size == 0:
            dd = np.zeros((0, len(st)))
        for a in (st, dd):
            a.setflags(write=False)
        object.__setattr__(self, "delta_states", st)
        object.__setattr__(self, "delta_draws", dd)

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.delta_draws.size:
            d["state_effects"] = encode_draws(self.delta_states, self.delta_draws)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "HierarchicalParams":
        base = super().from_dict(d)
        if not d.get("state_effects"):
            return base
        st, dd = decode_draws(d["state_effects"])
        return dataclasses.replace(base, delta_states=st, delta_draws=dd)


def encode_draws(states, draws) -> dict:
    """Posterior draws of per-state values, compactly: per state its range and 16-bit quantiles of it
    (``(value - low) / scale``, ``scale = range / 65535``: an error below ``range / 131070``), zlib
    and base64 (about 2 bytes a draw and state)."""
    import base64
    import zlib

    x = np.asarray(draws, float)
    lo = x.min(axis=0)
    scale = (x.max(axis=0) - lo) / 65535.0
    scale = np.where(scale > 0, scale, 1.0)
    lo, scale = np.round(lo, 7), np.round(scale, 10)
    scale = np.where(scale > 0, scale, 1e-10)
    q = np.clip(np.round((x - lo) / scale), 0, 65535).astype("<u2")
    return {"states": [int(v) for v in states], "draws": int(x.shape[0]), "low": lo.tolist(),
            "scale": scale.tolist(), "encoding": "uint16 quantiles, zlib, base64",
            "data": base64.b64encode(zlib.compress(q.tobytes(), 9)).decode("ascii")}


def decode_draws(d: dict) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`encode_draws`: ``(states, draws)``."""
    import base64
    import zlib

    st = np.asarray(d["states"], np.int64)
    n = int(d["draws"])
    q = np.frombuffer(zlib.decompress(base64.b64decode(d["data"])), dtype="<u2")
    if q.size != n * len(st):
        raise ValueError("state_effects: the data do not hold draws x states values")
    q = q.reshape(n, len(st)).astype(float)
    return st, np.asarray(d["low"], float) + q * np.asarray(d["scale"], float)


class HierarchicalFamily(LogitFamily):
    """The feature logit plus state effects: posterior draws of ``beta`` and ``tau``; a table draw
    adds state effects drawn from their exact conditionals (unseen states: from ``N(0, tau)``).
    The posterior mean is a Monte Carlo mean (400 draws, fixed seed), read from
    ``StrategyFit.stored_mean`` when the fit carries it."""

    exact_mean = False
    state_effects = True
    Params = HierarchicalParams

    def __init__(self, kind: str = "hierarchical"):
        super().__init__(kind)

    def fit(self, counts, *, rng=None, **kwargs) -> StrategyFit:
        return fit_hierarchical(counts, rng=rng, **kwargs)

    def check(self, fit) -> None:
        super().check(fit)
        td = fit.tau_draws
        if td.shape[0] != fit.coef_draws.shape[0] or np.any(td <= 0):
            raise ValueError("a hierarchical fit needs one positive tau draw per coefficient draw")
        p = fit.params
        dd = getattr(p, "delta_draws", np.zeros((0, 0)))
        if dd.size and (dd.shape != (fit.coef_draws.shape[0], len(p.delta_states))
                        or np.any(p.delta_states < 1) or np.any(p.delta_states >= fit.counts.shape[0])):
            raise ValueError("stored state effects need one draw per coefficient draw and states of the table "
                             "(not the empty memory)")

    def _with_state_effects(self, fit, eta, order, g):
        # unobserved states from the prior N(0, tau), observed ones from their one-dimensional
        # conditionals -- or, for a fit with run effects in the model, from their stored joint draws
        n_draws, S = eta.shape
        dd = fit.params.delta_draws
        if dd.size:
            tau = np.asarray(fit.tau_draws, dtype=float)[order]
            delta = g.normal(0.0, 1.0, (n_draws, S)) * tau[:, None]
            delta[:, 0] = 0.0
            delta[:, fit.params.delta_states] = dd[order]
            return eta + delta
        k = fit.counts[:, 1]
        n = fit.counts.sum(axis=1)
        obs = n > 0
        obs[0] = False  # the empty memory has its own bias column and no state effect
        tau = np.asarray(fit.tau_draws, dtype=float)[order]
        delta = g.normal(0.0, 1.0, (n_draws, S)) * tau[:, None]
        delta[:, 0] = 0.0
        n_obs = int(obs.sum())
        if n_obs:
            u = g.random((n_draws, n_obs))
            delta[:, obs] = conditional_deltas(eta[:, obs].ravel(), np.tile(k[obs], n_draws),
                                               np.tile(n[obs], n_draws), np.repeat(tau, n_obs),
                                               u.ravel()).reshape(n_draws, n_obs)
        return eta + delta

    def mean_table(self, fit, n_draws: int, rng) -> np.ndarray:
        if fit.stored_mean.size and n_draws == 400 and isinstance(rng, int) and rng == 0:
            return fit.stored_mean.copy()
        return fit.sample_tables(n_draws, rng=rng).mean(axis=0)

    def _coef_rows(self, fit, a) -> list:
        rows = super()._coef_rows(fit, a)
        x = fit.tau_draws
        rows.append({"parameter": "tau", "kind": "scale", "mean": x.mean(), "sd": x.std(),
                     "low": np.quantile(x, a), "high": np.quantile(x, 1 - a),
                     "meaning": "spread of the memory states' own effects beyond the features (0: the features "
                                "explain every state)"})
        return rows

    # ----------------------------------------------------------------- NUTS
    def _model_state_effects(self, eta, k, n, state_ids):
        pm = import_pymc()
        import pytensor.tensor as pt

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
        return eta + delta

    def _tau_draws(self, posterior) -> np.ndarray:
        return np.asarray(posterior["tau"]).reshape(-1)

    def _delta_draws(self, posterior, k, n, state_ids):
        """``(states, draws)``: the state effects of the observed states but the empty memory, per
        draw, rebuilt from the two parametrisations of :meth:`_model_state_effects`."""
        has_delta = state_ids != 0
        big = has_delta & (n > CENTRED_ABOVE)
        small = has_delta & ~big
        tau = np.asarray(posterior["tau"]).reshape(-1)
        out = np.zeros((tau.size, len(state_ids)))
        if small.any():
            out[:, small] = np.asarray(posterior["z"]).reshape(tau.size, -1) * tau[:, None]
        if big.any():
            out[:, big] = np.asarray(posterior["delta_c"]).reshape(tau.size, -1)
        return np.asarray(state_ids)[has_delta].astype(np.int64), out[:, has_delta]


HIERARCHICAL = HierarchicalFamily()


def fit_hierarchical(counts: StateCounts, *, decay="auto", draws: int = 1000, tune: int = 1000, chains: int = 2,
                     cores: int = 2, target_accept: float = 0.9, rng=None, meta: dict | None = None,
                     return_idata: bool = False, progress: bool = False, run_effects=True):
    """Fit the hierarchical strategy: feature logit plus partially pooled state effects (NUTS).

    Parameters
    ----------
    counts : StateCounts
        Two-name decision counts.
    decay, draws, tune, chains, cores, target_accept, rng, meta, return_idata, progress, run_effects
        As for :func:`normlab.calibration.fit_logit` (``run_effects``: the table, state effects and run
        effects sampled together, the default; the fit then stores its state effects' draws).

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
    _check_run_effects(run_effects)
    d = _resolve_decay(counts, decay, rng)
    return HIERARCHICAL._fit_nuts(counts, decay=d, sampler=dict(draws=draws, tune=tune, chains=chains, cores=cores,
                                                                target_accept=target_accept, progress=progress),
                                  rng=rng, meta=meta, return_idata=return_idata, run_effects=run_effects)
