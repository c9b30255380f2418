"""Between-run heterogeneity of an LLM's strategy: run effects on the logit of the table.

The strategy table of a fit is the behaviour *pooled* over the runs it was fitted on. An LLM
endpoint need not behave identically in every run: hardware, batching, quantisation, the serving
stack or the day change the logits a little, and runs of the same model differ. normlab measures
this from the fitted runs themselves with a two-parameter random effect per run ``r``::

    logit p_r(name_1 | s) = kappa_r * logit p(name_1 | s) + b_r,
    (b_r, log kappa_r) ~ Normal((mu_b, mu_k), Sigma),

a shift ``b`` towards one name and a sharpness ``kappa`` (``kappa < 1``: noisier, ``> 1``:
more decided), relative to the fitted table ``p``. The five parameters ``mu_b``, ``mu_k``,
``sd_b``, ``sd_k`` and the correlation ``rho`` are estimated by maximising the marginal
likelihood of the runs' decision counts (two-dimensional adaptive Gauss-Hermite quadrature per run, a weak
half-normal prior of scale 1 on each standard deviation), with a Laplace approximation of their
uncertainty. The likelihood-ratio statistic against "every run follows the table" says whether the
runs differ at all.

Predictions (:func:`normlab.calibration.predict`) give every simulated run its own effect. How
much of ``Sigma`` the runs of one *experiment cell* share (the runs at one committed count are
usually made together, in one session of the endpoint) cannot be told from one set of runs:
it is drawn, per posterior draw, as ``omega ~ Uniform(0, 1)`` -- a cell shift with covariance
``omega Sigma`` plus a run effect with ``(1 - omega) Sigma``.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods
("Committed minorities"), Table S3; A. Gelman, J. Hill, Data Analysis Using Regression and
Multilevel/Hierarchical Models (2007), ch. 14 (varying-intercept and varying-slope logistic
models); J. C. Pinheiro, D. M. Bates, J. Comput. Graph. Stat. 4, 12 (1995) (Gauss-Hermite
quadrature of the marginal likelihood).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from normlab._display import fmt, fmt_interval, html_card, plain, short_repr
from normlab._rng import as_generator

__all__ = ["RunEffects", "fit_run_effects", "run_effect_values"]

#: Parameters, in the order of :attr:`RunEffects.params` (``lsd_*``: log standard deviations,
#: ``z_rho``: Fisher's z of the correlation).
PARAMS = ("mu_b", "mu_k", "lsd_b", "lsd_k", "z_rho")
#: Gauss-Hermite nodes per dimension of the marginal likelihood (adaptive: centred on each run).
QUADRATURE = 5
#: Scale of the half-normal prior on each standard deviation (weak: logit units).
SD_PRIOR = 1.0
#: Fewest runs from which a heterogeneity is estimated.
MIN_RUNS = 3
_EPS = 1e-9


@dataclass(frozen=True)
class RunEffects:
    """How much an LLM's strategy varies between runs: the fitted run-effect distribution.

    Attributes
    ----------
    params : numpy.ndarray, shape (5,)
        Posterior mode of ``mu_b``, ``mu_k`` (mean shift and mean log-sharpness of a run relative
        to the fitted table), ``log sd_b``, ``log sd_k`` and ``atanh rho``; zeros and ``-inf``
        standard deviations for :meth:`none`.
    cov : numpy.ndarray, shape (5, 5)
        Laplace covariance of ``params`` (zeros for :meth:`none`).
    loglik, loglik_null : float
        Marginal log-likelihood of the runs at the mode, and with every run following the table.
    n_runs : int
        Runs (groups) the effects were estimated from.
    n_decisions : float
    share : str
        How the runs of one experiment cell share their effects in predictions (``"uniform"``:
        a share ``omega ~ U(0, 1)`` of the covariance per posterior draw; ``"none"``: every run
        independent; ``"all"``: one effect per cell).
    note : str
        Why the effects are zero, when they are.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Table S3;
    Gelman & Hill (2007), ch. 14.
    """

    params: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -np.inf, -np.inf, 0.0]))
    cov: np.ndarray = field(default_factory=lambda: np.zeros((5, 5)))
    loglik: float = 0.0
    loglik_null: float = 0.0
    n_runs: int = 0
    n_decisions: float = 0.0
    share: str = "uniform"
    note: str = ""

    def __post_init__(self):
        p = np.asarray(self.params, dtype=float).reshape(-1)
        c = np.asarray(self.cov, dtype=float)
        if p.shape != (5,) or c.shape != (5, 5):
            raise ValueError("params must have 5 entries and cov shape (5, 5)")
        if self.share not in ("uniform", "none", "all"):
            raise ValueError(f"share must be 'uniform', 'none' or 'all'; got {self.share!r}")
        for a in (p, c):
            a.setflags(write=False)
        object.__setattr__(self, "params", p)
        object.__setattr__(self, "cov", c)

    # ------------------------------------------------------------------ views
    @classmethod
    def none(cls, note: str = "no run effects") -> "RunEffects":
        """Every run follows the table (what a fit without several runs can only assume)."""
        return cls(note=note)

    @property
    def active(self) -> bool:
        """Whether the effects change anything (a positive standard deviation or a mean shift)."""
        return bool(np.isfinite(self.params[2]) or np.isfinite(self.params[3])) and self.n_runs > 0

    @property
    def sd_b(self) -> float:
        return float(np.exp(self.params[2]))

    @property
    def sd_k(self) -> float:
        return float(np.exp(self.params[3]))

    @property
    def rho(self) -> float:
        return float(np.tanh(self.params[4]))

    @property
    def lr_statistic(self) -> float:
        """``2 (loglik - loglik_null)``: how much better the runs are described with effects."""
        return float(2.0 * (self.loglik - self.loglik_null)) if self.active else 0.0

    @property
    def p_value(self) -> float:
        """Approximate p-value of "no heterogeneity" (chi-square with 5 degrees of freedom;
        conservative on the boundary)."""
        if not self.active:
            return float("nan")
        from scipy.stats import chi2

        return float(chi2.sf(max(self.lr_statistic, 0.0), 5))

    def interval(self, name: str, level: float = 0.95) -> tuple[float, float, float]:
        """Estimate and Laplace interval of ``sd_b``, ``sd_k``, ``mu_b``, ``mu_k`` or ``rho``."""
        from scipy.stats import norm

        z = norm.ppf(0.5 + level / 2)
        idx = {"mu_b": 0, "mu_k": 1, "sd_b": 2, "sd_k": 3, "rho": 4}[name]
        m, s = self.params[idx], math.sqrt(max(self.cov[idx, idx], 0.0))
        f = {"mu_b": float, "mu_k": float, "sd_b": math.exp, "sd_k": math.exp, "rho": math.tanh}[name]
        if not np.isfinite(m):
            return 0.0, 0.0, 0.0
        return f(m), f(m - z * s), f(m + z * s)

    def summary(self) -> dict:
        """Plain-Python summary: the five parameters with 95% intervals, the test, the data."""
        if not self.active:
            return plain({"active": False, "note": self.note, "n_runs": self.n_runs})
        out = {"active": True, "n_runs": self.n_runs, "n_decisions": self.n_decisions, "share": self.share,
               "lr_statistic": self.lr_statistic, "p_value": self.p_value}
        for k in ("sd_b", "sd_k", "rho", "mu_b", "mu_k"):
            e, lo, hi = self.interval(k)
            out[k] = {"estimate": e, "low": lo, "high": hi}
        return plain(out)

    def to_dict(self) -> dict:
        """JSON-able form (stored in a fit's ``meta["run_effects"]``); :meth:`from_dict` reads it."""
        p = [None if not np.isfinite(v) else float(v) for v in self.params]
        return {"params": p, "cov": self.cov.tolist(), "loglik": self.loglik, "loglik_null": self.loglik_null,
                "n_runs": self.n_runs, "n_decisions": self.n_decisions, "share": self.share, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict | None) -> "RunEffects":
        if not d:
            return cls.none()
        p = np.array([-np.inf if v is None else float(v) for v in d["params"]])
        return cls(params=p, cov=np.asarray(d["cov"], float), loglik=float(d["loglik"]),
                   loglik_null=float(d["loglik_null"]), n_runs=int(d["n_runs"]),
                   n_decisions=float(d["n_decisions"]), share=str(d.get("share", "uniform")),
                   note=str(d.get("note", "")))

    def __repr__(self) -> str:
        if not self.active:
            return short_repr("RunEffects", f"none ({self.note})" if self.note else "none")
        return short_repr("RunEffects", f"sd of the shift {fmt(self.sd_b)}, of the log-sharpness {fmt(self.sd_k)}, "
                          f"rho {fmt(self.rho)}", f"LR {fmt(self.lr_statistic)} (p {fmt(self.p_value)})",
                          f"{self.n_runs} runs")

    def _repr_html_(self) -> str:
        if not self.active:
            return html_card("RunEffects", [("between-run heterogeneity", "none", None, self.note)])
        rows = []
        for k, lab in (("sd_b", "sd of a run's shift b (logit)"), ("sd_k", "sd of a run's log-sharpness"),
                       ("rho", "correlation"), ("mu_b", "mean shift"), ("mu_k", "mean log-sharpness")):
            e, lo, hi = self.interval(k)
            rows.append((lab, e, (lo, hi), "Laplace 95%"))
        rows.append(("likelihood ratio vs identical runs", self.lr_statistic, None, f"p {fmt(self.p_value)}"))
        return html_card("RunEffects", rows, subtitle="heterogeneity of the strategy between runs",
                         settings={"runs": self.n_runs, "decisions": self.n_decisions, "cell share": self.share})

    # ------------------------------------------------------------------ draws
    def draws(self, n: int, *, rng=None) -> np.ndarray:
        """``n`` draws of ``(mu_b, mu_k, sd_b, sd_k, rho, omega)`` from the Laplace approximation
        (``omega``: the share of the covariance the runs of one cell share)."""
        g = as_generator(rng)
        out = np.zeros((n, 6))
        if not self.active:
            return out
        p = self.params.copy()
        finite = np.isfinite(p)
        z = np.zeros((n, 5))
        if finite.all():
            try:
                L = np.linalg.cholesky(self.cov + 1e-12 * np.eye(5))
                z = g.standard_normal((n, 5)) @ L.T
            except np.linalg.LinAlgError:
                z = g.standard_normal((n, 5)) * np.sqrt(np.maximum(np.diag(self.cov), 0.0))
        q = np.where(finite, p, 0.0) + z
        out[:, 0], out[:, 1] = q[:, 0], q[:, 1]
        out[:, 2] = np.where(finite[2], np.exp(q[:, 2]), 0.0)
        out[:, 3] = np.where(finite[3], np.exp(q[:, 3]), 0.0)
        out[:, 4] = np.tanh(q[:, 4])
        out[:, 5] = {"uniform": g.uniform(size=n), "none": np.zeros(n), "all": np.ones(n)}[self.share]
        return out

    @classmethod
    def _contract_example(cls) -> "RunEffects":
        """Effects estimated from six runs, literal mode and covariance (``tests/test_contracts.py``)."""
        return cls(params=np.array([0.1, -0.2, np.log(0.3), np.log(0.2), 0.1]), cov=np.eye(5) * 0.04, loglik=-410.0,
                   loglik_null=-416.5, n_runs=6, n_decisions=480.0, note="literal numbers")


def run_effect_values(draw: np.ndarray, cells, *, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """Per run the shift ``b`` and the sharpness ``kappa`` for one posterior draw of the effects.

    Parameters
    ----------
    draw : array_like, shape (6,)
        One row of :meth:`RunEffects.draws`.
    cells : sequence of int
        Runs per experiment cell (the runs of a cell share a part ``omega`` of the covariance).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``b`` and ``kappa`` for ``sum(cells)`` runs, cell by cell.
    """
    g = as_generator(rng)
    mu_b, mu_k, sd_b, sd_k, rho, om = (float(v) for v in draw)
    C = np.array([[sd_b * sd_b, rho * sd_b * sd_k], [rho * sd_b * sd_k, sd_k * sd_k]])
    try:
        L = np.linalg.cholesky(C + 1e-15 * np.eye(2))
    except np.linalg.LinAlgError:
        L = np.diag([sd_b, sd_k])
    cells = np.asarray(cells, np.int64)
    n = int(cells.sum())
    shared = np.repeat(g.standard_normal((len(cells), 2)) @ L.T, cells, axis=0)
    own = g.standard_normal((n, 2)) @ L.T
    e = math.sqrt(om) * shared + math.sqrt(1.0 - om) * own
    # the sharpness on the log scale, bounded: at a table of 0s and 1s (a strong bias) its posterior can
    # reach values whose exp overflows to inf, and inf * 0 poisons every later product with NaN
    return mu_b + e[:, 0], np.exp(np.clip(mu_k + e[:, 1], -30.0, 30.0))


# ----------------------------------------------------------------------------- estimation
def _run_rows(counts, logit1):
    """Rows of (run, x = logit p(name 1 | s), k1, k0) sorted by run, with run starts."""
    gi = np.asarray(counts.group_index, np.int64)
    order = np.argsort(gi, kind="stable")
    gi = gi[order]
    s = np.asarray(counts.group_state, np.int64)[order]
    c = np.asarray(counts.group_counts, float)[order]
    keep = c.sum(axis=1) > 0
    gi, s, c = gi[keep], s[keep], c[keep]
    starts = np.flatnonzero(np.r_[True, gi[1:] != gi[:-1]])
    return logit1[s], c[:, 1], c[:, 0], starts


def _log_sigmoid(x):
    # log(1 / (1 + exp(-x))) written with one exp and one log1p (np.logaddexp is several times slower)
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _run_terms(b, lk, x, k1, k0, starts, rid):
    """Per run, at its own ``(b, log kappa)``: the log-likelihood, its gradient and Hessian."""
    kap = np.exp(np.clip(lk, -8.0, 8.0))[rid]
    b = np.clip(b, -30.0, 30.0)
    eta = kap * x + b[rid]
    ls = _log_sigmoid(eta)
    p = np.exp(ls)
    n = k1 + k0
    r = k1 - n * p
    w = n * p * (1.0 - p)
    kx = kap * x
    ll = np.add.reduceat(k1 * ls + k0 * (ls - eta), starts)  # log sigmoid(-eta) = log sigmoid(eta) - eta
    g = np.stack([np.add.reduceat(r, starts), np.add.reduceat(r * kx, starts)], axis=1)
    hbb = -np.add.reduceat(w, starts)
    hbk = -np.add.reduceat(w * kx, starts)
    hkk = np.add.reduceat(r * kx - w * kx * kx, starts)
    return ll, g, hbb, hbk, hkk


def _marginal(theta, x, k1, k0, starts, rid, nodes, weights):
    """Marginal log-likelihood of all runs (adaptive Gauss-Hermite quadrature: each run's nodes
    centred at the mode of its integrand and scaled by its curvature, Pinheiro & Bates 1995) plus
    the half-normal prior on the standard deviations."""
    mu_b, mu_k, lsb, lsk, zr = theta
    sb, sk, rho = math.exp(lsb), math.exp(lsk), math.tanh(zr)
    cov = np.array([[sb * sb, rho * sb * sk], [rho * sb * sk, sk * sk]])
    P = np.linalg.inv(cov)
    logdet = math.log(np.linalg.det(cov))
    mu = np.array([mu_b, mu_k])
    R = len(starts)
    u = np.tile(mu, (R, 1))
    for _ in range(30):  # Newton on every run at once: mode of log-lik + log-prior
        _, g, hbb, hbk, hkk = _run_terms(u[:, 0], u[:, 1], x, k1, k0, starts, rid)
        g = g - (u - mu) @ P.T
        H = np.empty((R, 2, 2))
        H[:, 0, 0], H[:, 0, 1], H[:, 1, 0], H[:, 1, 1] = hbb - P[0, 0], hbk - P[0, 1], hbk - P[1, 0], hkk - P[1, 1]
        # a negative definite Hessian where the log-likelihood is not concave: fall back to the prior's
        det = H[:, 0, 0] * H[:, 1, 1] - H[:, 0, 1] * H[:, 1, 0]
        bad = (H[:, 0, 0] >= 0) | (det <= 0)
        H[bad] = -P
        step = -np.linalg.solve(H, g[..., None])[..., 0]
        step = np.clip(step, -1.0, 1.0)
        u = u + step
        if np.max(np.abs(step)) < 1e-8:
            break
    _, _, hbb, hbk, hkk = _run_terms(u[:, 0], u[:, 1], x, k1, k0, starts, rid)
    H = np.empty((R, 2, 2))
    H[:, 0, 0], H[:, 0, 1], H[:, 1, 0], H[:, 1, 1] = hbb - P[0, 0], hbk - P[0, 1], hbk - P[1, 0], hkk - P[1, 1]
    det = H[:, 0, 0] * H[:, 1, 1] - H[:, 0, 1] * H[:, 1, 0]
    bad = (H[:, 0, 0] >= 0) | (det <= 0)
    H[bad] = -P
    C = np.linalg.inv(-H)  # per-run covariance of the integrand's Gaussian approximation
    C = (C + np.transpose(C, (0, 2, 1))) / 2 + 1e-12 * np.eye(2)
    Lc = np.linalg.cholesky(C)
    z = np.stack(nodes, axis=1)  # (Q*Q, 2) standard normal nodes
    pts = u[:, None, :] + np.einsum("rij,qj->rqi", Lc, z)  # (R, Q*Q, 2)
    Q2 = z.shape[0]
    bb = pts[:, :, 0].reshape(-1)
    kk = pts[:, :, 1].reshape(-1)
    # log-likelihood of every run at each of its nodes
    ll = np.empty((R, Q2))
    for q in range(Q2):
        ll[:, q] = _run_terms(pts[:, q, 0], pts[:, q, 1], x, k1, k0, starts, rid)[0]
    d = pts - mu
    lprior = -math.log(2 * math.pi) - 0.5 * logdet - 0.5 * np.einsum("rqi,ij,rqj->rq", d, P, d)
    f = ll + lprior + 0.5 * np.sum(z * z, axis=1)[None, :]
    m = f.max(axis=1)
    logdetL = np.log(Lc[:, 0, 0] * Lc[:, 1, 1])
    tot = float(np.sum(m + np.log(np.exp(f - m[:, None]) @ weights) + logdetL + math.log(2 * math.pi)))
    prior = -0.5 * (sb * sb + sk * sk) / SD_PRIOR**2 + lsb + lsk  # half-normal on each sd, Jacobian of log
    return tot + prior


def _null(x, k1, k0) -> float:
    return float(np.sum(k1 * _log_sigmoid(x) + k0 * _log_sigmoid(-x)))


def fit_run_effects(counts, table, *, share: str = "uniform", quadrature: int = QUADRATURE,
                    start: RunEffects | None = None) -> RunEffects:
    """Estimate the between-run heterogeneity of a strategy from its runs' decision counts.

    Parameters
    ----------
    counts : normlab.calibration.StateCounts
        Decision counts per state, grouped by run (two names).
    table : StrategyFit, StrategyTable or array_like
        The fitted table the effects are relative to (a fit: its posterior mean table).
    share : {"uniform", "none", "all"}, optional
        How predictions share a draw's effects within an experiment cell (see :class:`RunEffects`).
    quadrature : int, optional
        Gauss-Hermite nodes per dimension.
    start : RunEffects, optional
        An earlier estimate on similar runs (e.g. before a few runs were added): the optimiser
        starts there only, instead of from two default points (about half the time).

    Returns
    -------
    RunEffects
        :meth:`RunEffects.none` (with the reason) for fewer than three runs or other than two names.

    References
    ----------
    Pinheiro & Bates (1995); Gelman & Hill (2007), ch. 14.
    """
    from scipy.optimize import minimize

    if counts.n_names != 2:
        return RunEffects.none("run effects are estimated for two names only")
    n_groups = len(np.unique(counts.group_index))
    if n_groups < MIN_RUNS:
        return RunEffects.none(f"{n_groups} run(s): too few to tell runs apart")
    p = _table_p1(table, counts)
    p = np.clip(p, 1e-9, 1 - 1e-9)
    logit1 = np.log(p) - np.log1p(-p)
    x, k1, k0, starts = _run_rows(counts, logit1)
    rid = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(x)]))
    gx, gw = np.polynomial.hermite_e.hermegauss(int(quadrature))
    gw = gw / gw.sum()
    z1, z2 = np.meshgrid(gx, gx, indexing="ij")
    nodes = (z1.ravel(), z2.ravel())
    weights = np.outer(gw, gw).ravel()

    def f(th):
        with np.errstate(all="ignore"):
            v = -_marginal(th, x, k1, k0, starts, rid, nodes, weights)
        return v if np.isfinite(v) else 1e300

    best = None
    inits = ((0.0, 0.0, math.log(0.3), math.log(0.1), 0.0), (0.0, 0.0, math.log(0.05), math.log(0.05), 0.0))
    if start is not None:
        if not isinstance(start, RunEffects):
            raise TypeError(f"start must be a RunEffects; got {type(start).__name__}")
        if start.active and np.isfinite(start.params).all():
            inits = (tuple(np.clip(start.params, [-5, -3, math.log(1e-3), math.log(1e-3), -3],
                                    [5, 3, math.log(5), math.log(3), 3])),)
    for x0 in inits:
        r = minimize(f, np.array(x0), method="L-BFGS-B",
                     bounds=[(-5, 5), (-3, 3), (math.log(1e-3), math.log(5)), (math.log(1e-3), math.log(3)), (-3, 3)])
        if best is None or r.fun < best.fun:
            best = r
    th = best.x
    cov = _laplace(f, th)
    ll = -f(th) + 0.0
    prior_at = -0.5 * (math.exp(th[2]) ** 2 + math.exp(th[3]) ** 2) / SD_PRIOR**2 + th[2] + th[3]
    return RunEffects(params=th, cov=cov, loglik=float(ll - prior_at), loglik_null=_null(x, k1, k0),
                      n_runs=n_groups, n_decisions=float(k1.sum() + k0.sum()), share=share)


def _table_p1(table, counts) -> np.ndarray:
    """p(name 1 | s) of a fit (posterior mean), a StrategyTable or an array."""
    if hasattr(table, "mean_table"):
        t = table.mean_table().table
    elif hasattr(table, "table"):
        t = table.table
    else:
        t = np.asarray(table, float)
    t = np.asarray(t, float)
    if t.ndim == 1:
        return t
    return t[:, 1]


def _laplace(f, th, h=1e-3) -> np.ndarray:
    """Inverse of the numerical Hessian of ``f`` at ``th`` (central differences), regularised."""
    n = len(th)
    H = np.zeros((n, n))
    f0 = f(th)
    for i in range(n):
        for j in range(i, n):
            e_i = np.eye(n)[i] * h
            e_j = np.eye(n)[j] * h
            if i == j:
                H[i, i] = (f(th + e_i) - 2 * f0 + f(th - e_i)) / h**2
            else:
                H[i, j] = H[j, i] = (f(th + e_i + e_j) - f(th + e_i - e_j) - f(th - e_i + e_j) + f(th - e_i - e_j)) / (4 * h * h)
    w, V = np.linalg.eigh((H + H.T) / 2)
    w = np.maximum(w, 1e-6)
    return (V / w) @ V.T
