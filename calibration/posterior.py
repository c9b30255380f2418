"""A fitted strategy with its uncertainty: posterior draws of the whole table p(name | state).

:class:`StrategyFit` is what every fitter returns (:func:`normlab.calibration.fit_empirical`,
:func:`normlab.calibration.fit_logit`, :func:`normlab.calibration.fit_hierarchical`) and what the
predictions consume. It stores *sufficient* information to draw complete tables:

- ``empirical``: the counts; a draw is an independent Dirichlet per state
  (``Dirichlet(counts + prior)``; an unseen state gets the flat prior, i.e. "anything goes").
- ``logit`` / ``logit_symmetric``: posterior draws of the 11 feature coefficients
  (:mod:`normlab.calibration.features`); a draw is ``sigmoid(X @ beta)``.
- ``hierarchical``: posterior draws of ``beta`` and of the state-effect scale ``tau``, plus the
  counts. Given ``(beta, tau)`` the state effects ``delta_s`` are independent, each with density
  ``N(delta; 0, tau) * Binomial(counts_s | sigmoid(x_s beta + delta))``; a draw samples each
  ``delta_s`` from that one-dimensional conditional (numerical inverse CDF on a 161-point grid
  spanning +-10 Laplace standard deviations around its mode). This is an exact draw from the
  joint posterior (up to the grid), and an unseen state draws ``delta ~ N(0, tau)``: where data
  are thin the table is as uncertain as the data warrant. It is also what makes a fit small
  enough to ship (:func:`load_fit`).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, legend_outside, load_result, new_axes, plain, plotting, save_result, short_repr
from normlab._rng import as_generator

from .inputs import _state_tables, state_labels

__all__ = ["StrategyFit", "KINDS", "load_fit", "shipped_fits"]

KINDS = ("empirical", "logit", "logit_symmetric", "hierarchical")
_GRID = 161
_GRID_HALF_WIDTH = 10.0
_CHUNK = 4_000_000  # grid cells per block of conditional draws (about 32 MB per array)
FORMAT_VERSION = 1


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


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
        from normlab.theory._jit import njit

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


@dataclass(frozen=True)
class StrategyFit:
    """A fitted strategy table with posterior uncertainty.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    names : tuple of str
    memory : int
    counts : numpy.ndarray, shape (n_states, W)
        Training counts per state (the data the fit saw).
    prior : float
        Dirichlet concentration per name (``empirical``).
    decay : float
        Recency decay of the features (``logit``/``hierarchical``; NaN otherwise).
    coef_names : tuple of str
    coef_draws : numpy.ndarray, shape (D, n_coef)
        Posterior draws of the feature coefficients (empty for ``empirical``).
    tau_draws : numpy.ndarray, shape (D,)
        Posterior draws of the state-effect scale (``hierarchical``; empty otherwise).
    diagnostics : dict
        Sampler diagnostics (max R-hat, min ESS, divergences...); empty for ``empirical``.
    meta : dict
        Provenance: data source, model, runs, settings.
    stored_mean : numpy.ndarray, shape (n_states, W), optional
        The result of ``mean_table()`` with its default arguments, computed once and stored
        (the shipped hierarchical fits carry it: the Monte Carlo mean costs seconds); empty if
        not stored.

    References
    ----------
    A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1,
    Fig. S8 (strategy tables), Methods.
    """

    kind: str
    names: tuple
    memory: int
    counts: np.ndarray
    prior: float = 1.0
    decay: float = float("nan")
    coef_names: tuple = ()
    coef_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    tau_draws: np.ndarray = field(default_factory=lambda: np.zeros(0))
    diagnostics: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    stored_mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def __post_init__(self):
        from normlab.theory.strategies import n_states

        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {self.kind!r}")
        names = tuple(self.names)
        W = len(names)
        c = np.asarray(self.counts, dtype=float)
        if c.shape != (n_states(W, int(self.memory)), W):
            raise ValueError(f"counts must have shape (n_states, W) = ({n_states(W, int(self.memory))}, {W}); got {c.shape}")
        cd = np.asarray(self.coef_draws, dtype=float)
        td = np.asarray(self.tau_draws, dtype=float).reshape(-1)
        if self.kind != "empirical":
            if W != 2:
                raise ValueError("feature-based strategy models support two names only (W = 2)")
            if cd.ndim != 2 or cd.shape[0] == 0 or cd.shape[1] != len(self.coef_names):
                raise ValueError("coef_draws must be (draws, len(coef_names)) with at least one draw")
        if self.kind == "hierarchical" and (td.shape[0] != cd.shape[0] or np.any(td <= 0)):
            raise ValueError("a hierarchical fit needs one positive tau draw per coefficient draw")
        if not self.prior > 0:
            raise ValueError(f"prior must be > 0; got {self.prior}")
        sm = np.asarray(self.stored_mean, dtype=float)
        if sm.size and sm.shape != c.shape:
            raise ValueError(f"stored_mean must have the shape of counts {c.shape}; got {sm.shape}")
        for a in (c, cd, td, sm):
            a.setflags(write=False)
        object.__setattr__(self, "stored_mean", sm)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "memory", int(self.memory))
        object.__setattr__(self, "counts", c)
        object.__setattr__(self, "coef_draws", cd)
        object.__setattr__(self, "tau_draws", td)

    # ----------------------------------------------------------------- basic views
    @property
    def n_names(self) -> int:
        return len(self.names)

    @property
    def n_states(self) -> int:
        return self.counts.shape[0]

    @property
    def n_draws(self) -> int:
        """Stored posterior draws (``inf`` for the conjugate empirical model)."""
        return self.coef_draws.shape[0] if self.kind != "empirical" else np.inf

    @property
    def observed(self) -> np.ndarray:
        return self.counts.sum(axis=1) > 0

    def design(self) -> np.ndarray:
        from .features import design_matrix

        return design_matrix(self.memory, self.decay)

    # ----------------------------------------------------------------- draws
    def sample_tables(self, n_draws: int, *, rng=None) -> np.ndarray:
        """Posterior draws of the whole table.

        Parameters
        ----------
        n_draws : int
            Number of tables. Feature-based fits cycle through their stored coefficient draws
            (in a random order) when more are asked than stored.
        rng : None, int, SeedSequence or Generator, optional

        Returns
        -------
        numpy.ndarray, shape (n_draws, n_states, W)
            ``p[d, s, n]``: probability of name ``n`` in state ``s`` under draw ``d``.
        """
        if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise ValueError(f"n_draws must be an int >= 1; got {n_draws!r}")
        g = as_generator(rng)
        S, W = self.counts.shape
        if self.kind == "empirical":
            a = self.counts + self.prior
            x = g.standard_gamma(np.broadcast_to(a, (n_draws, S, W)))
            x = np.maximum(x, 1e-300)
            return x / x.sum(axis=2, keepdims=True)
        D = self.coef_draws.shape[0]
        order = np.concatenate([g.permutation(D) for _ in range(-(-n_draws // D))])[:n_draws]
        X = self.design()
        out = np.empty((n_draws, S, 2))
        k = self.counts[:, 1]
        n = self.counts.sum(axis=1)
        obs = n > 0
        obs[0] = False  # the empty memory has its own bias column and no state effect
        # all draws at once: unobserved states from the prior N(0, tau), observed ones from their
        # one-dimensional conditionals
        eta = self.coef_draws[order] @ X.T
        if self.kind == "hierarchical":
            tau = np.asarray(self.tau_draws, dtype=float)[order]
            delta = g.normal(0.0, 1.0, (n_draws, S)) * tau[:, None]
            delta[:, 0] = 0.0
            n_obs = int(obs.sum())
            if n_obs:
                u = g.random((n_draws, n_obs))
                delta[:, obs] = conditional_deltas(eta[:, obs].ravel(), np.tile(k[obs], n_draws),
                                                   np.tile(n[obs], n_draws), np.repeat(tau, n_obs),
                                                   u.ravel()).reshape(n_draws, n_obs)
            eta = eta + delta
        p1 = _sigmoid(eta)
        out[:, :, 1] = p1
        out[:, :, 0] = 1.0 - p1
        return out

    def tables(self, n_draws: int, *, rng=None) -> list:
        """Posterior draws as :class:`normlab.theory.strategies.StrategyTable` objects."""
        from normlab.theory.strategies import StrategyTable

        return [StrategyTable(t, memory=self.memory, names=self.names) for t in self.sample_tables(n_draws, rng=rng)]

    def mean_table(self, *, n_draws: int = 400, rng=0):
        """Posterior-mean table (exact for ``empirical``/``logit``; Monte Carlo with ``n_draws``
        conditional draws and a fixed seed for ``hierarchical``, read from :attr:`stored_mean`
        when the fit carries it and the arguments are the defaults).

        Returns
        -------
        normlab.theory.strategies.StrategyTable
        """
        from normlab.theory.strategies import StrategyTable

        if self.kind == "empirical":
            a = self.counts + self.prior
            t = a / a.sum(axis=1, keepdims=True)
        elif self.kind in ("logit", "logit_symmetric"):
            p1 = _sigmoid(self.coef_draws @ self.design().T).mean(axis=0)
            t = np.column_stack([1 - p1, p1])
        elif self.stored_mean.size and n_draws == 400 and isinstance(rng, int) and rng == 0:
            t = self.stored_mean.copy()
        else:
            t = self.sample_tables(n_draws, rng=rng).mean(axis=0)
        return StrategyTable(t, memory=self.memory, names=self.names)

    def with_stored_mean(self) -> "StrategyFit":
        """A copy carrying ``mean_table()`` (default arguments) in :attr:`stored_mean`."""
        import dataclasses

        plain = dataclasses.replace(self, stored_mean=np.zeros((0, 0)))
        return dataclasses.replace(self, stored_mean=plain.mean_table().table)

    def to_logit_strategy(self):
        """The posterior-mean feature model as a :class:`~normlab.theory.strategies.LogitStrategy`
        (feature-based fits only; the hierarchical state effects are dropped)."""
        from .features import to_logit_strategy

        if self.kind == "empirical":
            raise ValueError("an empirical fit has no feature coefficients")
        return to_logit_strategy(self.coef_draws.mean(axis=0), self.decay)

    # ----------------------------------------------------------------- tidy output
    def to_frame(self, *, n_draws: int = 400, level: float = 0.95, rng=0) -> pd.DataFrame:
        """Posterior summary of every (state, name).

        Parameters
        ----------
        n_draws : int, optional
            Draws used for the intervals (fixed seed ``rng`` for reproducibility).
        level : float, optional
            Credible level.

        Returns
        -------
        pandas.DataFrame
            Columns ``state``, ``memory_state``, ``memory_len``, ``name``, ``count``, ``n``
            (training decisions in that state), ``observed``, ``mean``, ``low``, ``high``
            (equal-tailed credible interval), ``sd``.
        """
        draws = self.sample_tables(n_draws, rng=rng)
        a = (1 - level) / 2
        lo, hi = np.quantile(draws, [a, 1 - a], axis=0)
        S, W = self.counts.shape
        _, lengths = _state_tables(W, self.memory)
        n = self.counts.sum(axis=1)
        labels = state_labels(self.names, self.memory)
        mean = self.mean_table().table if self.kind != "hierarchical" else draws.mean(axis=0)
        return pd.DataFrame({
            "state": np.repeat(np.arange(S), W),
            "memory_state": np.repeat(np.asarray(labels, dtype=object), W),
            "memory_len": np.repeat(lengths, W),
            "name": np.tile(np.asarray(self.names, dtype=object), S),
            "count": self.counts.reshape(-1),
            "n": np.repeat(n, W),
            "observed": np.repeat(n > 0, W),
            "mean": mean.reshape(-1),
            "low": lo.reshape(-1),
            "high": hi.reshape(-1),
            "sd": draws.std(axis=0).reshape(-1),
        })

    def coef_frame(self, level: float = 0.95) -> pd.DataFrame:
        """Posterior summary of the feature coefficients (and ``tau``).

        Returns
        -------
        pandas.DataFrame
            Columns ``parameter``, ``kind`` (``symmetric`` / ``bias`` / ``scale``), ``mean``,
            ``sd``, ``low``, ``high``.
        """
        if self.kind == "empirical":
            return pd.DataFrame(columns=["parameter", "kind", "mean", "sd", "low", "high"])
        a = (1 - level) / 2
        rows = []
        for j, nm in enumerate(self.coef_names):
            x = self.coef_draws[:, j]
            rows.append({"parameter": nm, "kind": "symmetric" if nm.startswith("sym_") else "bias",
                         "mean": x.mean(), "sd": x.std(), "low": np.quantile(x, a), "high": np.quantile(x, 1 - a)})
        if self.kind == "hierarchical":
            x = self.tau_draws
            rows.append({"parameter": "tau", "kind": "scale", "mean": x.mean(), "sd": x.std(),
                         "low": np.quantile(x, a), "high": np.quantile(x, 1 - a)})
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        """Model, data and sampler diagnostics as plain Python values."""
        n = self.counts.sum(axis=1)
        return plain({
            "kind": self.kind,
            "names": list(self.names),
            "memory": self.memory,
            "decisions": float(n.sum()),
            "states_observed": int((n > 0).sum()),
            "states_total": int(self.n_states),
            "draws": None if self.kind == "empirical" else int(self.coef_draws.shape[0]),
            "decay": None if np.isnan(self.decay) else self.decay,
            "diagnostics": dict(self.diagnostics),
            "meta": dict(self.meta),
        })

    # ----------------------------------------------------------------- display
    def _source(self) -> str:
        """``LLM, 40 baseline runs`` from the provenance in :attr:`meta` (empty if unknown)."""
        m = self.meta
        src = m.get("source") if isinstance(m.get("source"), dict) else {}
        llm = m.get("llm") or ",".join(map(str, src.get("models", []) or []))
        runs = src.get("n_runs")
        kinds = m.get("fit_on") or ",".join(map(str, src.get("kinds", []) or []))
        return ", ".join(x for x in (str(llm or ""), f"{runs} {kinds} runs".replace("  ", " ") if runs else "") if x)

    def __repr__(self) -> str:
        n = self.counts.sum(axis=1)
        d = self.diagnostics
        diag = None
        if d:
            diag = f"R-hat max {fmt(d.get('r_hat_max'))}, divergences {fmt(d.get('divergences'))}"
        if self.kind == "empirical":  # p(name | empty memory) without drawing the whole table
            p0 = (self.counts[0] + self.prior) / (self.counts[0] + self.prior).sum()
        else:  # the empty memory has no state effect: its mean is the features' alone
            p1 = float(_sigmoid(self.coef_draws @ self.design()[0]).mean())
            p0 = (1.0 - p1, p1)
        return short_repr("StrategyFit", self.kind, self._source() or None, f"names {','.join(self.names)}",
                          f"H={self.memory}", f"{fmt(float(n.sum()))} decisions",
                          f"{int((n > 0).sum())}/{self.n_states} states seen",
                          "empty memory: " + ", ".join(f"p({a})={v:.3f}" for a, v in zip(self.names, p0)),
                          None if self.kind == "empirical" else f"{self.coef_draws.shape[0]} draws", diag)

    def _repr_html_(self) -> str:
        n = self.counts.sum(axis=1)
        f = self.to_frame(n_draws=100)
        rows = []
        first = f[f["state"] == 0]
        for _, r in first.iterrows():
            rows.append((f"p({r['name']} | empty memory)", r["mean"], (r["low"], r["high"])))
        if self.n_names == 2:  # unanimous full memories: how strongly each convention holds
            full = f[f["memory_len"] == self.memory]
            for k, nm in enumerate(self.names):
                lab = ";".join([f"{nm},{nm}"] * self.memory)
                r = full[(full["memory_state"] == lab) & (full["name"] == nm)]
                if len(r):
                    r = r.iloc[0]
                    rows.append((f"p({nm} | all {nm})", r["mean"], (r["low"], r["high"]), f"{fmt(r['n'])} decisions"))
        if self.kind != "empirical":
            for _, r in self.coef_frame().iterrows():
                rows.append((f"coefficient {r['parameter']}", r["mean"], (r["low"], r["high"])))
        d = self.diagnostics
        settings = {"decisions": float(n.sum()), "states seen": f"{int((n > 0).sum())} of {self.n_states}",
                    "decay": None if np.isnan(self.decay) else self.decay, "source": self._source() or None}
        if d:
            settings.update({"R-hat max": d.get("r_hat_max"), "ESS bulk min": d.get("ess_bulk_min"),
                             "divergences": d.get("divergences")})
        return html_card("StrategyFit", rows, subtitle=f"{self.kind} model of p(name | memory), names "
                         f"{','.join(self.names)}, H = {self.memory}", settings=settings, max_rows=24,
                         note="credible intervals; .plot() draws the heat map (kind='ppc': posterior predictive "
                              "check); .to_frame() gives every state; .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "heatmap", *, name: str | None = None, memory_len: int | None = None, ax=None,
             rng=0):
        """The fitted strategy: posterior-mean heat map (states without training decisions are
        crossed), or the posterior predictive check of the training counts.

        Parameters
        ----------
        kind : {"heatmap", "ppc"}, optional
            ``ppc``: observed frequency of the last name in every state against its posterior
            predictive mean (small points), and per memory length with 95% predictive intervals
            (:func:`normlab.calibration.posterior_predictive_check`).
        name, memory_len : optional
            Heat map: the name coloured and the memory length shown.
        ax : matplotlib Axes, optional
        rng : optional
            Seed of the predictive draws (``ppc``).

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. S8, Table 1;
        Gelman et al., Bayesian Data Analysis (2013), ch. 6 (posterior predictive checks).
        """
        if kind == "heatmap":
            return self.mean_table().plot(name=name, memory_len=memory_len, unseen=~self.observed, ax=ax)
        if kind != "ppc":
            raise ValueError(f"kind must be 'heatmap' or 'ppc'; got {kind!r}")
        from .bayes import posterior_predictive_check

        ppc = posterior_predictive_check(self, rng=rng)
        st, ln = ppc[ppc["scope"] == "state"], ppc[ppc["scope"] == "memory_len"]
        ax = new_axes(ax, (5.6, 5.6))
        nm = self.names[-1]
        ax.scatter(st["pred_mean"], st["observed_freq"], s=np.clip(np.sqrt(st["n"]) * 3, 4, 60), alpha=0.3,
                   color="C0", lw=0, label="memory states (size: decisions)")
        ax.errorbar(ln["pred_mean"], ln["observed_freq"],
                    xerr=[ln["pred_mean"] - ln["pred_low"], ln["pred_high"] - ln["pred_mean"]], fmt="o", color="C3",
                    capsize=3, label="per memory length (95% predictive interval)")
        for _, r in ln.iterrows():
            ax.annotate(f"L={int(r['memory_len'])}", (r["pred_mean"], r["observed_freq"]), fontsize=7, color="C3",
                        xytext=(-16, 6), textcoords="offset points")
        ax.plot([0, 1], [0, 1], color="0.4", lw=0.8, ls="--")
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel=f"posterior predictive p({nm})",
               ylabel=f"observed frequency of {nm}",
               title=f"posterior predictive check: {st['covered'].mean():.0%} of states inside 95% intervals")
        ax.title.set_fontsize(9)
        legend_outside(ax, "below", ncol=1)
        return ax

    def save(self, path) -> Path:
        """Write the fit to the folder ``path`` (``result.json`` holds :meth:`to_dict`); read it
        back with :meth:`load`, ``normlab.load`` or :func:`load_fit`."""
        return save_result(path, type(self), {"fit": self.to_dict()})

    @classmethod
    def load(cls, path) -> "StrategyFit":
        """Read a fit written by :meth:`save`."""
        meta, _ = load_result(path, cls)
        return cls.from_dict(meta["fit"])

    # ----------------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        """JSON-friendly dictionary (counts stored sparsely by state label)."""
        labels = state_labels(self.names, self.memory)
        obs = np.flatnonzero(self.counts.sum(axis=1) > 0)
        counts = {labels[s]: [round(float(v), 6) for v in self.counts[s]] for s in obs}
        return {
            "format": "normlab.calibration.StrategyFit",
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "names": list(self.names),
            "memory": self.memory,
            "prior": self.prior,
            "decay": None if np.isnan(self.decay) else self.decay,
            "coef_names": list(self.coef_names),
            "coef_draws": np.round(self.coef_draws, 5).tolist(),
            "tau_draws": np.round(self.tau_draws, 5).tolist(),
            "counts": counts,
            "diagnostics": _jsonable(self.diagnostics),
            "meta": _jsonable(self.meta),
            **({"mean_table": self.stored_mean.tolist()} if self.stored_mean.size else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "StrategyFit":
        """Inverse of :meth:`to_dict`."""
        from normlab.theory.strategies import n_states

        if not isinstance(d, dict) or d.get("format") != "normlab.calibration.StrategyFit":
            raise ValueError("not a normlab StrategyFit document (missing format tag)")
        if int(d.get("version", 0)) > FORMAT_VERSION:
            raise ValueError(f"StrategyFit format version {d.get('version')} is newer than this normlab ({FORMAT_VERSION})")
        names = tuple(d["names"])
        H = int(d["memory"])
        W = len(names)
        idx = {lab: k for k, lab in enumerate(state_labels(names, H))}
        counts = np.zeros((n_states(W, H), W))
        for lab, v in d["counts"].items():
            if lab not in idx:
                raise ValueError(f"state {lab!r} is not a memory state of names {names}, H={H}")
            counts[idx[lab]] = v
        ncoef = len(d.get("coef_names", []))
        return cls(
            kind=d["kind"], names=names, memory=H, counts=counts, prior=float(d.get("prior", 1.0)),
            decay=float("nan") if d.get("decay") is None else float(d["decay"]),
            coef_names=tuple(d.get("coef_names", [])),
            coef_draws=np.asarray(d.get("coef_draws", []), dtype=float).reshape(-1, ncoef) if ncoef else np.zeros((0, 0)),
            tau_draws=np.asarray(d.get("tau_draws", []), dtype=float),
            diagnostics=d.get("diagnostics", {}), meta=d.get("meta", {}),
            stored_mean=np.asarray(d["mean_table"], dtype=float) if d.get("mean_table") else np.zeros((0, 0)),
        )

    def to_json(self, path) -> Path:
        """Write the fit as JSON; returns the path."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), separators=(",", ":")))
        return path

    @classmethod
    def from_json(cls, path) -> "StrategyFit":
        """Read a fit written by :meth:`to_json`."""
        return cls.from_dict(json.loads(Path(path).read_text()))


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if np.isnan(o) else float(o)
    if isinstance(o, float) and np.isnan(o):
        return None
    if isinstance(o, np.ndarray):
        return _jsonable(o.tolist())
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def shipped_fits() -> list[str]:
    """Names of the fitted tables shipped with normlab (see :func:`load_fit`)."""
    root = resources.files("normlab.calibration") / "data"
    try:
        return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):  # pragma: no cover - broken install
        return []


def load_fit(name_or_path) -> StrategyFit:
    """Load a shipped fitted table by name (e.g. ``"llama31_70b_QM_H5"``), a JSON file path, or a
    folder written by :meth:`StrategyFit.save`.

    The shipped tables were fitted by ``calibration/_build_tables.py`` on the baseline
    (convergence) runs of the AI-norms data of Flint Ashery et al. (2025); see :func:`shipped_fits`.

    Parameters
    ----------
    name_or_path : str or os.PathLike

    Returns
    -------
    StrategyFit
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"load_fit takes a shipped table's name or a path; got {type(name_or_path).__name__}")
    p = Path(name_or_path)
    if p.suffix == ".json" and p.is_file():
        try:
            return StrategyFit.from_json(p)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{p} is not valid JSON ({exc})") from None
        except ValueError as exc:
            raise ValueError(f"{p}: {exc}") from None
    if p.is_dir():
        return StrategyFit.load(p)
    name = str(name_or_path)
    avail = shipped_fits()
    if name not in avail:
        if p.suffix == ".json" or len(p.parts) > 1:
            raise FileNotFoundError(f"fitted table {name}: no such file (a fit saved by --save-fit or "
                                    f"StrategyFit.to_json, or a shipped table: {', '.join(avail)})")
        raise ValueError(f"unknown fitted table {name!r}; shipped: {avail} (or pass a .json path)")
    root = resources.files("normlab.calibration") / "data" / f"{name}.json"
    return StrategyFit.from_dict(json.loads(root.read_text()))
