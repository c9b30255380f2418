"""Between-run heterogeneity of an LLM's strategy: run effects on the logit of the table.

The strategy table of a fit describes the runs it was fitted on. An LLM endpoint need not behave
identically in every run: hardware, batching, quantisation, the serving stack or the day change
the logits a little, and runs of the same model differ. normlab measures this from the fitted runs
themselves with a two-parameter random effect per run ``r``::

    logit p_r(name_1 | s) = kappa_r * logit p(name_1 | s) + b_r,
    (b_r, log kappa_r) ~ Normal((mu_b, mu_k), Sigma),   Sigma = [[sd_b^2, rho sd_b sd_k], [., sd_k^2]],

a shift ``b`` towards one name and a sharpness ``kappa`` (``kappa < 1``: noisier, ``> 1``: more
decided). Two ways to estimate it (:attr:`RunEffects.kind`):

``"joint"`` -- in the model (the NUTS fit kinds, :mod:`normlab.calibration.fit.hierarchical` and
    :mod:`~normlab.calibration.fit.logit`): the table and the run effects are sampled together, the
    effects non-centred with mean zero (so the fitted table is the median run's) and
    ``sd_b, sd_k ~ HalfNormal(1)`` (positive density at 0). :attr:`RunEffects.sample` holds the
    posterior draws of ``(0, 0, sd_b, sd_k, rho)``, row ``i`` paired with the fit's table draw ``i``.
``"marginal"`` -- beside a fitted table (``empirical`` fits, :func:`normlab.calibration.tip` refits, a
    fit made without effects): :func:`fit_run_effects` maximises the marginal likelihood of the runs'
    decision counts (two-dimensional adaptive Gauss-Hermite quadrature per run, in the standardised
    effects, so a standard deviation of 0 is handled exactly; Pinheiro & Bates 1995) relative to the
    table of *mean logits* over the fit's posterior draws (the mean of probabilities is flatter than
    the draws: Jensen's inequality would show as a mean sharpness). No prior enters the estimate.
    ``rho`` is 0 unless both standard deviations are distinguishable from 0 (each one-component test,
    reference ``1/2 chi2_0 + 1/2 chi2_1``, at p < 0.05), then it is profiled (21 values). The
    uncertainty of ``(sd_b, sd_k)`` is a grid posterior: the marginal likelihood on a 15 x 15 lattice
    from 0, times ``HalfNormal(1)`` priors on the standard deviations, sampled; its quantiles are the
    intervals (a lower end of 0 allowed). The mean effect ``(mu_b, mu_k)`` is kept: it is the
    correction of the table the average run needs (reported with its own test), and predictions play
    it.

The test of "no heterogeneity", ``(sd_b, sd_k) = (0, 0)`` with the mean free under both, refers the
likelihood ratio to a chi-bar-squared distribution (both parameters on the boundary, Self & Liang
1987; Kudo's weights ``w0 = arccos(r) / 2 pi``, ``w1 = 1/2``, ``w2 = 1/2 - w0``, ``r`` the
correlation of the two variance estimates at the null, from the per-run scores). The reference is
asymptotic; with few runs it is conservative, as variance-component tests are (Crainiceanu & Ruppert
2004): at 20 runs of 20 states and 3-11 decisions each, 35 % of null data sets give LR = 0 against
``w0`` = 0.26, and a parametric bootstrap puts a p-value of 0.59 at 0.40
(``tests/calibration/test_experiment_design.py::test_heterogeneity_pvalues_are_uniform_under_the_null``).

Predictions (:func:`normlab.calibration.predict`) give every simulated run its own effect: per
posterior draw one row of :attr:`RunEffects.sample` (a joint fit's row paired with the table draw).
How much of ``Sigma`` the runs of one *experiment cell* share (the runs at one committed count are
usually made together, in one session of the endpoint) cannot be told from one set of runs: it is
drawn, per posterior draw, as ``omega ~ Uniform(0, 1)`` -- a cell shift with covariance
``omega Sigma`` plus a run effect with ``(1 - omega) Sigma``. The fitted runs' spread is read as
the whole ``Sigma``, i.e. as the spread of independent runs, so predicted convergence runs (the
kind of run the effects were estimated from) are independent runs, each with its own whole
effect. Were the fitted runs made in one session sharing a part of their effect, the fit would
see only the rest: ``benchmarks/bench_coverage.py``'s ``run_effects`` family measures what that
costs (docs/validation/calibration.md).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods
("Committed minorities"), Table S3; A. Gelman, J. Hill, Data Analysis Using Regression and
Multilevel/Hierarchical Models (2007), ch. 14 (varying-intercept and varying-slope logistic
models); J. C. Pinheiro, D. M. Bates, J. Comput. Graph. Stat. 4, 12 (1995) (Gauss-Hermite
quadrature of the marginal likelihood); S. G. Self, K.-Y. Liang, J. Am. Stat. Assoc. 82, 605 (1987)
and A. Kudo, Biometrika 50, 403 (1963) (likelihood ratios on the boundary, chi-bar-squared weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from normlab._display import fmt, html_card, plain, short_repr
from normlab._rng import as_generator

__all__ = ["RunEffects", "fit_run_effects", "run_effect_values"]

#: Parameters, in the order of :attr:`RunEffects.params` (``lsd_*``: log standard deviations,
#: ``z_rho``: Fisher's z of the correlation).
PARAMS = ("mu_b", "mu_k", "lsd_b", "lsd_k", "z_rho")
#: Columns of :attr:`RunEffects.sample`.
SAMPLE_COLUMNS = ("mu_b", "mu_k", "sd_b", "sd_k", "rho")
#: Gauss-Hermite nodes per dimension of the marginal likelihood (adaptive: centred on each run).
QUADRATURE = 5
#: Scale of the half-normal prior on each standard deviation (logit units; the joint model's prior
#: and the grid posterior's).
SD_PRIOR = 1.0
#: Fewest runs from which a heterogeneity is estimated.
MIN_RUNS = 3
#: Draws kept in :attr:`RunEffects.sample` of a marginal fit.
SAMPLE_SIZE = 400
#: Bounds of the standard deviations in the marginal fit (logit units).
SD_BOUNDS = (5.0, 3.0)
#: Values of ``rho`` its profile is read at (when both standard deviations are fitted).
RHO_GRID = tuple(np.round(np.linspace(-0.95, 0.95, 21), 3))
_EPS = 1e-9


def _nan(v) -> float:
    return float("nan") if v is None else float(v)


@dataclass(frozen=True)
class RunEffects:
    """How much an LLM's strategy varies between runs: the fitted run-effect distribution.

    Attributes
    ----------
    params : numpy.ndarray, shape (5,)
        Point estimates of ``mu_b``, ``mu_k`` (mean shift and mean log-sharpness of a run relative
        to the fitted table), ``log sd_b``, ``log sd_k`` and ``atanh rho`` (``-inf``: a standard
        deviation of 0): the maximum likelihood of a marginal fit, the posterior medians of a joint one.
    cov : numpy.ndarray, shape (5, 5)
        Laplace covariance of ``params`` (kind ``"laplace"``, the estimates before issue 32; zeros
        otherwise).
    loglik, loglik_null : float
        Marginal log-likelihood of the runs at the estimate, and with every run following the table.
    n_runs : int
        Runs (groups) the effects were estimated from.
    n_decisions : float
    share : str
        How the runs of one experiment cell share their effects in predictions (``"uniform"``:
        a share ``omega ~ U(0, 1)`` of the covariance per posterior draw; ``"none"``: every run
        independent; ``"all"``: one effect per cell). Convergence runs are independent runs
        under every share (see the module docstring).
    note : str
        Why the effects are zero, when they are.
    sample : numpy.ndarray, shape (M, 5)
        Draws of ``(mu_b, mu_k, sd_b, sd_k, rho)``: the joint posterior's (row ``i`` paired with
        the fit's table draw ``i``; mean effects 0) or the grid posterior of a marginal fit.
    kind : {"joint", "marginal", "laplace", "laplace (old)", "none"}
    lr_heterogeneity, p_heterogeneity : float
        Likelihood ratio of ``(sd_b, sd_k) = (0, 0)`` (mean free) against free standard deviations
        (``rho = 0``) and its chi-bar-squared p-value.
    lr_mean, p_mean : float
        Likelihood ratio of ``(mu_b, mu_k) = (0, 0)`` (standard deviations free) and its p-value
        (chi2, 2 degrees of freedom): does the average run follow the table?
    weights : tuple of float
        The chi-bar-squared weights ``(w0, w1, w2)`` of ``p_heterogeneity``.
    tests : dict
        The one-component tests (``sd_b`` alone, ``sd_k`` alone), the ``rho`` profile (when fitted),
        the reference table and the grid of the posterior.
    omega : numpy.ndarray, shape (M,) or (0,)
        Cell shares paired with the rows of :attr:`sample` (a draw that has already fixed its
        ``omega``, such as :func:`normlab.calibration.tip`'s replication tables, which integrate the
        fitted cells' shared effects out with it); empty: :attr:`share` draws it.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Table S3;
    Gelman & Hill (2007), ch. 14; Self & Liang (1987); Kudo (1963).
    """

    params: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -np.inf, -np.inf, 0.0]))
    cov: np.ndarray = field(default_factory=lambda: np.zeros((5, 5)))
    loglik: float = 0.0
    loglik_null: float = 0.0
    n_runs: int = 0
    n_decisions: float = 0.0
    share: str = "uniform"
    note: str = ""
    sample: np.ndarray = field(default_factory=lambda: np.zeros((0, 5)))
    kind: str = ""
    lr_heterogeneity: float = float("nan")
    p_heterogeneity: float = float("nan")
    lr_mean: float = float("nan")
    p_mean: float = float("nan")
    weights: tuple = ()
    tests: dict = field(default_factory=dict)
    omega: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self):
        p = np.asarray(self.params, dtype=float).reshape(-1)
        c = np.asarray(self.cov, dtype=float)
        sm = np.asarray(self.sample, dtype=float).reshape(-1, 5)
        if p.shape != (5,) or c.shape != (5, 5):
            raise ValueError("params must have 5 entries and cov shape (5, 5)")
        if self.share not in ("uniform", "none", "all"):
            raise ValueError(f"share must be 'uniform', 'none' or 'all'; got {self.share!r}")
        if sm.size and (np.any(sm[:, 2:4] < 0) or np.any(np.abs(sm[:, 4]) > 1) or not np.isfinite(sm).all()):
            raise ValueError("sample rows are (mu_b, mu_k, sd_b >= 0, sd_k >= 0, -1 <= rho <= 1)")
        om = np.asarray(self.omega, dtype=float).reshape(-1)
        if om.size and (len(om) != len(sm) or np.any((om < 0) | (om > 1))):
            raise ValueError(f"omega must hold one share in [0, 1] per sample row ({len(sm)}); got {len(om)}")
        kind = self.kind
        if not kind:
            if sm.size:
                kind = "marginal"
            elif self.n_runs > 0 and (np.isfinite(p[2]) or np.isfinite(p[3])):
                kind = "laplace"
            else:
                kind = "none"
        if kind not in ("joint", "marginal", "laplace", "laplace (old)", "none"):
            raise ValueError(f"kind must be 'joint', 'marginal', 'laplace' or 'none'; got {kind!r}")
        for a in (p, c, sm, om):
            a.setflags(write=False)
        object.__setattr__(self, "omega", om)
        object.__setattr__(self, "params", p)
        object.__setattr__(self, "cov", c)
        object.__setattr__(self, "sample", sm)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        for k in ("lr_heterogeneity", "p_heterogeneity", "lr_mean", "p_mean"):
            object.__setattr__(self, k, _nan(getattr(self, k)))

    # ------------------------------------------------------------------ views
    @classmethod
    def none(cls, note: str = "no run effects") -> "RunEffects":
        """Every run follows the table (what a fit without several runs can only assume)."""
        return cls(note=note, kind="none")

    @property
    def active(self) -> bool:
        """Whether the effects change anything (a fitted distribution of run effects)."""
        if self.n_runs <= 0 or self.kind == "none":
            return False
        if self.sample.size:
            return True
        return bool(np.isfinite(self.params[2]) or np.isfinite(self.params[3]))

    @property
    def mu_b(self) -> float:
        return float(self.params[0])

    @property
    def mu_k(self) -> float:
        return float(self.params[1])

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
        """Likelihood ratio of "every run the same" (mean effect free): :attr:`lr_heterogeneity`
        (before issue 32: ``2 (loglik - loglik_null)``, the mean effect tested too)."""
        if not self.active:
            return 0.0
        if np.isfinite(self.lr_heterogeneity):
            return float(self.lr_heterogeneity)
        return float(2.0 * (self.loglik - self.loglik_null))

    @property
    def p_value(self) -> float:
        """p-value of "no heterogeneity": :attr:`p_heterogeneity` (chi-bar-squared); for an
        estimate read from before issue 32, chi-square with 5 degrees of freedom."""
        if not self.active:
            return float("nan")
        if np.isfinite(self.p_heterogeneity):
            return float(self.p_heterogeneity)
        from scipy.stats import chi2

        return float(chi2.sf(max(self.lr_statistic, 0.0), 5))

    def interval(self, name: str, level: float = 0.95) -> tuple[float, float, float]:
        """Estimate and interval of ``sd_b``, ``sd_k``, ``mu_b``, ``mu_k`` or ``rho``: equal-tailed
        quantiles of :attr:`sample` -- for a standard deviation its one-component test cannot tell
        from 0 (p >= ``1 - level``), one-sided from 0 -- or for a Laplace estimate its normal
        interval on the log scale."""
        idx = {"mu_b": 0, "mu_k": 1, "sd_b": 2, "sd_k": 3, "rho": 4}[name]
        point = {"mu_b": self.mu_b, "mu_k": self.mu_k, "sd_b": self.sd_b, "sd_k": self.sd_k, "rho": self.rho}[name]
        if self.sample.size:
            a = (1 - level) / 2
            alone = (self.tests.get(f"{name}_alone") or {}).get("p_value")
            if name in ("sd_b", "sd_k") and alone is not None and alone >= 1 - level:
                # not distinguishable from 0 (its one-component test): one-sided, from 0
                return float(point), 0.0, float(np.quantile(self.sample[:, idx], level))
            lo, hi = np.quantile(self.sample[:, idx], [a, 1 - a])
            return float(point), float(lo), float(hi)
        from scipy.stats import norm

        z = norm.ppf(0.5 + level / 2)
        m, s = self.params[idx], math.sqrt(max(self.cov[idx, idx], 0.0))
        f = {"mu_b": float, "mu_k": float, "sd_b": math.exp, "sd_k": math.exp, "rho": math.tanh}[name]
        if not np.isfinite(m):
            return 0.0, 0.0, 0.0
        return f(m), f(m - z * s), f(m + z * s)

    def summary(self) -> dict:
        """Plain-Python summary: the five parameters with 95% intervals, the tests, the data."""
        if not self.active:
            return plain({"active": False, "note": self.note, "n_runs": self.n_runs})
        out = {"active": True, "kind": self.kind, "n_runs": self.n_runs, "n_decisions": self.n_decisions,
               "share": self.share, "lr_statistic": self.lr_statistic, "p_value": self.p_value,
               "lr_mean": self.lr_mean, "p_mean": self.p_mean, "chi_bar_weights": list(self.weights),
               "rho_fitted": bool(self.tests.get("rho_fitted", self.kind == "laplace"))}
        for k in ("sd_b", "sd_k", "rho", "mu_b", "mu_k"):
            e, lo, hi = self.interval(k)
            out[k] = {"estimate": e, "low": lo, "high": hi}
        for k in ("sd_b_alone", "sd_k_alone"):
            if k in self.tests:
                out[k] = self.tests[k]
        return plain(out)

    def to_dict(self) -> dict:
        """JSON-able form (stored in a fit's ``meta["run_effects"]``); :meth:`from_dict` reads it."""
        p = [None if not np.isfinite(v) else float(v) for v in self.params]
        d = {"params": p, "cov": self.cov.tolist(), "loglik": self.loglik, "loglik_null": self.loglik_null,
             "n_runs": self.n_runs, "n_decisions": self.n_decisions, "share": self.share, "note": self.note,
             "kind": self.kind}
        if self.sample.size:
            d["sample"] = self.sample.tolist()
        if self.omega.size:
            d["omega"] = self.omega.tolist()
        for k in ("lr_heterogeneity", "p_heterogeneity", "lr_mean", "p_mean"):
            v = getattr(self, k)
            d[k] = None if not np.isfinite(v) else float(v)
        if self.weights:
            d["weights"] = list(self.weights)
        if self.tests:
            d["tests"] = plain(self.tests)
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "RunEffects":
        if not d:
            return cls.none()
        p = np.array([-np.inf if v is None else float(v) for v in d["params"]])
        kind = str(d.get("kind") or "")
        if not kind:  # written before issue 32: a MAP with a Laplace approximation
            kind = "laplace (old)" if int(d["n_runs"]) > 0 and (np.isfinite(p[2]) or np.isfinite(p[3])) else "none"
        return cls(params=p, cov=np.asarray(d["cov"], float), loglik=float(d["loglik"]),
                   loglik_null=float(d["loglik_null"]), n_runs=int(d["n_runs"]),
                   n_decisions=float(d["n_decisions"]), share=str(d.get("share", "uniform")),
                   note=str(d.get("note", "")), sample=np.asarray(d.get("sample") or np.zeros((0, 5)), float),
                   kind=kind, lr_heterogeneity=_nan(d.get("lr_heterogeneity")),
                   p_heterogeneity=_nan(d.get("p_heterogeneity")), lr_mean=_nan(d.get("lr_mean")),
                   p_mean=_nan(d.get("p_mean")), weights=tuple(d.get("weights") or ()), tests=d.get("tests") or {},
                   omega=np.asarray(d.get("omega") or np.zeros(0), float))

    def __repr__(self) -> str:
        if not self.active:
            return short_repr("RunEffects", f"none ({self.note})" if self.note else "none")
        rho = f", rho {fmt(self.rho)}" if self.tests.get("rho_fitted", self.kind.startswith("laplace")) else ""
        return short_repr("RunEffects", f"{self.kind}: sd of the shift {fmt(self.sd_b)}, of the log-sharpness "
                          f"{fmt(self.sd_k)}{rho}", f"LR {fmt(self.lr_statistic)} (p {fmt(self.p_value)})",
                          f"{self.n_runs} runs")

    def _repr_html_(self) -> str:
        if not self.active:
            return html_card("RunEffects", [("between-run heterogeneity", "none", None, self.note)])
        rows = []
        how = "posterior 95%" if self.sample.size else "Laplace 95%"
        for k, lab in (("sd_b", "sd of a run's shift b (logit)"), ("sd_k", "sd of a run's log-sharpness"),
                       ("rho", "correlation"), ("mu_b", "mean shift"), ("mu_k", "mean log-sharpness")):
            e, lo, hi = self.interval(k)
            rows.append((lab, e, (lo, hi), how))
        rows.append(("likelihood ratio vs identical runs", self.lr_statistic, None, f"p {fmt(self.p_value)}"))
        if np.isfinite(self.lr_mean):
            rows.append(("likelihood ratio: the average run vs the table", self.lr_mean, None, f"p {fmt(self.p_mean)}"))
        return html_card("RunEffects", rows, subtitle=f"heterogeneity of the strategy between runs ({self.kind})",
                         settings={"runs": self.n_runs, "decisions": self.n_decisions, "cell share": self.share})

    def aligned(self, index) -> "RunEffects":
        """A copy whose :attr:`sample` row ``i`` is row ``index[i]`` of this one: a joint fit's effects
        lined up with explicit table draws (``fit.tables(n, return_index=True)``), so that a
        prediction from those tables plays each with its own effects (row ``i`` with table ``i``)."""
        import dataclasses

        if not self.sample.size:
            return self
        i = np.asarray(index, np.int64) % self.sample.shape[0]
        return dataclasses.replace(self, sample=self.sample[i], omega=self.omega[i] if self.omega.size else self.omega)

    # ------------------------------------------------------------------ draws
    def draws(self, n: int, *, rng=None, index=None) -> np.ndarray:
        """``n`` draws of ``(mu_b, mu_k, sd_b, sd_k, rho, omega)`` (``omega``: the share of the
        covariance the runs of one cell share, ``U(0, 1)`` for ``share="uniform"``).

        Rows of :attr:`sample`: ``index[i]`` (modulo its length) when given -- a joint fit's effects
        paired with the table draws of :meth:`StrategyFit.tables` ``(..., return_index=True)`` --
        else drawn at random; an estimate read from before issue 32 draws from its Laplace
        approximation."""
        g = as_generator(rng)
        out = np.zeros((n, 6))
        if not self.active:
            return out
        if self.sample.size:
            M = self.sample.shape[0]
            rows = np.asarray(index, np.int64) % M if index is not None else g.integers(0, M, n)
            if len(rows) != n:
                raise ValueError(f"index must have one entry per draw ({n}); got {len(rows)}")
            out[:, :5] = self.sample[rows]
            if self.omega.size:  # shares fixed with the rows
                out[:, 5] = self.omega[rows]
                return out
        else:
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
        """Effects estimated from six runs, literal mode and covariance (``tests/umbrella/test_contracts.py``)."""
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
    L = _chol(sd_b, sd_k, rho)
    cells = np.asarray(cells, np.int64)
    n = int(cells.sum())
    shared = np.repeat(g.standard_normal((len(cells), 2)) @ L.T, cells, axis=0)
    own = g.standard_normal((n, 2)) @ L.T
    e = math.sqrt(om) * shared + math.sqrt(1.0 - om) * own
    # the sharpness on the log scale, bounded: at a table of 0s and 1s (a strong bias) its posterior can
    # reach values whose exp overflows to inf, and inf * 0 poisons every later product with NaN
    return mu_b + e[:, 0], np.exp(np.clip(mu_k + e[:, 1], -30.0, 30.0))


def _chol(sd_b: float, sd_k: float, rho: float) -> np.ndarray:
    """The lower Cholesky factor of the effects' covariance (exact at a standard deviation of 0)."""
    rho = min(max(float(rho), -1.0), 1.0)
    return np.array([[sd_b, 0.0], [rho * sd_k, math.sqrt(max(1.0 - rho * rho, 0.0)) * sd_k]])


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


class _Runs:
    """The runs' rows against a reference table and the quadrature nodes: what the marginal
    likelihood is evaluated on."""

    def __init__(self, x, k1, k0, starts, quadrature):
        self.x, self.k1, self.k0, self.starts = x, k1, k0, starts
        self.rid = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(x)]))
        self.R = len(starts)
        gx, gw = np.polynomial.hermite_e.hermegauss(int(quadrature))
        gw = gw / gw.sum()
        z1, z2 = np.meshgrid(gx, gx, indexing="ij")
        self.t = np.stack([z1.ravel(), z2.ravel()], axis=1)  # (Q*Q, 2) standard normal nodes
        self.logw = np.log(np.outer(gw, gw).ravel()) + 0.5 * np.sum(self.t ** 2, axis=1)
        self.n_evals = 0

    def terms(self, u):
        return _run_terms(u[:, 0], u[:, 1], self.x, self.k1, self.k0, self.starts, self.rid)

    def loglik(self, theta) -> float:
        """Marginal log-likelihood at ``theta = (mu_b, mu_k, sd_b, sd_k, rho)`` (no prior).

        Each run's effect is ``mu + L z`` with ``z`` standard normal and ``L`` the Cholesky factor
        of the covariance, so a standard deviation of 0 is a column of zeros (exact, no
        quadrature in that direction); the integral over ``z`` is adaptive Gauss-Hermite: nodes
        centred on the mode of each run's integrand and scaled by its curvature (Pinheiro & Bates
        1995)."""
        self.n_evals += 1
        mu = np.array(theta[:2], float)
        L = _chol(theta[2], theta[3], theta[4])
        R = self.R
        if not L.any():  # no heterogeneity: every run at the mean effect
            return float(self.terms(np.tile(mu, (R, 1)))[0].sum())
        z = np.zeros((R, 2))
        eye = np.eye(2)
        for _ in range(40):  # Newton on every run at once: the mode of log-lik + log N(z; 0, I)
            _, g, hbb, hbk, hkk = self.terms(mu + z @ L.T)
            gz = g @ L - z
            Hz = _hz(L, hbb, hbk, hkk)
            det = Hz[:, 0, 0] * Hz[:, 1, 1] - Hz[:, 0, 1] * Hz[:, 1, 0]
            bad = (Hz[:, 0, 0] >= 0) | (det <= 0)
            Hz[bad] = -eye  # not concave there: a step of the standard normal's curvature
            step = np.clip(-np.linalg.solve(Hz, gz[..., None])[..., 0], -1.0, 1.0)
            z = z + step
            if np.max(np.abs(step)) < 1e-9:
                break
        _, _, hbb, hbk, hkk = self.terms(mu + z @ L.T)
        Hz = _hz(L, hbb, hbk, hkk)
        det = Hz[:, 0, 0] * Hz[:, 1, 1] - Hz[:, 0, 1] * Hz[:, 1, 0]
        Hz[(Hz[:, 0, 0] >= 0) | (det <= 0)] = -eye
        C = np.linalg.inv(-Hz)
        C = (C + np.transpose(C, (0, 2, 1))) / 2 + 1e-12 * eye
        Lc = np.linalg.cholesky(C)
        t0, t1 = self.t[:, 0][None, :], self.t[:, 1][None, :]
        p0 = z[:, 0:1] + Lc[:, 0, 0:1] * t0  # (R, Q*Q): the nodes in z
        p1 = z[:, 1:2] + Lc[:, 1, 0:1] * t0 + Lc[:, 1, 1:2] * t1
        ub = mu[0] + L[0, 0] * p0  # and as effects
        uk = mu[1] + L[1, 0] * p0 + L[1, 1] * p1
        ll = _run_loglik(ub, uk, self.x, self.k1, self.k0, self.starts, self.rid)
        f = ll - 0.5 * (p0 * p0 + p1 * p1) + self.logw[None, :]
        m = f.max(axis=1)
        logdetL = np.log(Lc[:, 0, 0] * Lc[:, 1, 1])
        return float(np.sum(m + np.log(np.exp(f - m[:, None]).sum(axis=1)) + logdetL))

    def null_scores(self, mu) -> np.ndarray:
        """Per run the score at ``(mu, sd = 0)`` in ``(mu_b, mu_k, var_b, var_k)`` (the variances'
        one-sided derivatives at 0: half the second derivative plus the squared first of each run's
        log-likelihood)."""
        _, g, hbb, _, hkk = self.terms(np.tile(np.asarray(mu, float), (self.R, 1)))
        return np.column_stack([g[:, 0], g[:, 1], 0.5 * (hbb + g[:, 0] ** 2), 0.5 * (hkk + g[:, 1] ** 2)])


def _hz(L, hbb, hbk, hkk):
    """``L' H L - I`` per run: the Hessian of log-lik + log N(z; 0, I) in the standardised effects
    (``L = [[a, 0], [c, d]]``, written out)."""
    a, c, d = L[0, 0], L[1, 0], L[1, 1]
    H = np.empty((len(hbb), 2, 2))
    H[:, 0, 0] = a * a * hbb + 2 * a * c * hbk + c * c * hkk - 1.0
    H[:, 0, 1] = H[:, 1, 0] = d * (a * hbk + c * hkk)
    H[:, 1, 1] = d * d * hkk - 1.0
    return H


def _run_loglik(b, lk, x, k1, k0, starts, rid) -> np.ndarray:
    """Per run the log-likelihood at each of its nodes: ``b``, ``lk`` shaped ``(runs, nodes)``."""
    kap = np.exp(np.clip(lk, -8.0, 8.0))[rid]
    eta = kap * x[:, None] + np.clip(b, -30.0, 30.0)[rid]
    ls = _log_sigmoid(eta)
    return np.add.reduceat(k1[:, None] * ls + k0[:, None] * (ls - eta), starts, axis=0)


def _null(x, k1, k0) -> float:
    return float(np.sum(k1 * _log_sigmoid(x) + k0 * _log_sigmoid(-x)))


def _maximise(runs: _Runs, free: tuple, fixed: dict, starts) -> tuple[np.ndarray, float]:
    """Maximum of the marginal likelihood over the parameters ``free`` (names of
    :data:`SAMPLE_COLUMNS`), the others at ``fixed``; several starts, the best kept."""
    from scipy.optimize import minimize

    bounds = {"mu_b": (-5.0, 5.0), "mu_k": (-3.0, 3.0), "sd_b": (0.0, SD_BOUNDS[0]), "sd_k": (0.0, SD_BOUNDS[1]),
              "rho": (-0.99, 0.99)}
    base = {"mu_b": 0.0, "mu_k": 0.0, "sd_b": 0.0, "sd_k": 0.0, "rho": 0.0, **fixed}

    def full(v):
        d = dict(base)
        d.update(zip(free, v))
        return [d[k] for k in SAMPLE_COLUMNS]

    if not free:
        th = full([])
        return np.array(th), runs.loglik(th)

    def f(v):
        with np.errstate(all="ignore"):
            val = -runs.loglik(full(v))
        return val if np.isfinite(val) else 1e300

    best = None
    for s in starts:
        x0 = np.array([min(max(s.get(k, base[k]), bounds[k][0]), bounds[k][1]) for k in free])
        r = minimize(f, x0, method="L-BFGS-B", bounds=[bounds[k] for k in free],
                     options={"ftol": 1e-10, "gtol": 1e-6})
        if best is None or r.fun < best.fun:
            best = r
    return np.array(full(best.x)), float(-best.fun)


def _chibar_weights(runs: _Runs, mu) -> tuple[tuple, float]:
    """Kudo's chi-bar-squared weights for ``(var_b, var_k) = 0`` with the mean free: ``r`` the
    correlation of the two variance estimates, from the outer product of the per-run scores at the
    null with the mean partialled out (``r = 0``, weights 1/4, 1/2, 1/4, when it cannot be read)."""
    s = runs.null_scores(mu)
    I = s.T @ s
    try:
        Ie = I[2:, 2:] - I[2:, :2] @ np.linalg.solve(I[:2, :2], I[:2, 2:])
        V = np.linalg.inv(Ie)
        r = float(V[0, 1] / math.sqrt(V[0, 0] * V[1, 1]))
        if not np.isfinite(r) or V[0, 0] <= 0 or V[1, 1] <= 0:
            raise ValueError
    except (np.linalg.LinAlgError, ValueError, ZeroDivisionError):
        r = 0.0
    r = min(max(r, -1.0), 1.0)
    w0 = math.acos(r) / (2 * math.pi)
    return (w0, 0.5, 0.5 - w0), r


def _chibar_p(lr: float, weights) -> float:
    from scipy.stats import chi2

    lr = max(float(lr), 0.0)
    w0, w1, w2 = weights
    return float(min(1.0, w1 * chi2.sf(lr, 1) + w2 * chi2.sf(lr, 2) + (w0 if lr <= 1e-6 else 0.0)))


def _reference_logits(table, counts, reference: str) -> np.ndarray:
    """logit p(name 1 | s) of the table the effects are relative to: a fit's mean of its draws'
    logits (``"mean_logit"``; 400 draws, seed 0) or of its mean table (``"mean_table"``), a
    StrategyTable's or an array's own."""
    if hasattr(table, "sample_tables"):
        if reference == "mean_logit":
            p = np.clip(table.sample_tables(400, rng=0)[:, :, 1], 1e-9, 1 - 1e-9)
            return np.mean(np.log(p) - np.log1p(-p), axis=0)
        if reference != "mean_table":
            raise ValueError(f"reference must be 'mean_logit' or 'mean_table'; got {reference!r}")
    p = np.clip(_table_p1(table, counts), 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def _tests(runs: _Runs, inits) -> tuple:
    """The marginal fits behind the tests -- free standard deviations (rho 0), none, each alone, the
    mean fixed at 0 -- and the tests: ``(estimate, its log-likelihood, one-component tests,
    lr_heterogeneity, p_heterogeneity, chi-bar weights, lr_mean, p_mean)``."""
    from scipy.stats import chi2

    mu_only = [{k: v for k, v in s.items() if k.startswith("mu")} for s in inits]
    # the fits: free standard deviations (rho 0); none; each alone; the mean fixed at 0
    th, ll = _maximise(runs, ("mu_b", "mu_k", "sd_b", "sd_k"), {}, inits)
    th0, ll0 = _maximise(runs, ("mu_b", "mu_k"), {}, mu_only or [{}])
    thb, llb = _maximise(runs, ("mu_b", "mu_k", "sd_b"), {}, [{**s, "sd_b": th[2] or 0.05} for s in mu_only])
    thk, llk = _maximise(runs, ("mu_b", "mu_k", "sd_k"), {}, [{**s, "sd_k": th[3] or 0.05} for s in mu_only])
    if llb > ll:  # a restricted fit found a higher maximum: start the full fit there
        th, ll = _maximise(runs, ("mu_b", "mu_k", "sd_b", "sd_k"), {}, [dict(zip(SAMPLE_COLUMNS, thb))])
    if llk > ll:
        th, ll = _maximise(runs, ("mu_b", "mu_k", "sd_b", "sd_k"), {}, [dict(zip(SAMPLE_COLUMNS, thk))])
    thm, llm = _maximise(runs, ("sd_b", "sd_k"), {"mu_b": 0.0, "mu_k": 0.0},
                         [{"sd_b": max(th[2], 0.02), "sd_k": max(th[3], 0.02)}])
    lr_het = max(2.0 * (ll - ll0), 0.0)
    weights, r_null = _chibar_weights(runs, th0[:2])
    p_het = _chibar_p(lr_het, weights)
    lr_b, lr_k = max(2.0 * (ll - llk), 0.0), max(2.0 * (ll - llb), 0.0)  # sd_b = 0 (sd_k free); sd_k = 0
    p_b = float(0.5 * chi2.sf(lr_b, 1)) if lr_b > 1e-9 else 1.0
    p_k = float(0.5 * chi2.sf(lr_k, 1)) if lr_k > 1e-9 else 1.0
    lr_mean = max(2.0 * (ll - llm), 0.0)
    p_mean = float(chi2.sf(lr_mean, 2))
    tests = {"sd_b_alone": {"lr": lr_b, "p_value": p_b}, "sd_k_alone": {"lr": lr_k, "p_value": p_k},
             "null_score_correlation": r_null}
    return th, ll, tests, lr_het, p_het, weights, lr_mean, p_mean


def joint_run_effects(fit, counts, draws, *, share: str = "uniform", quadrature: int = QUADRATURE) -> RunEffects:
    """The run effects of a joint fit (kind ``"joint"``): the posterior draws ``(sd_b, sd_k, rho)``
    (``draws``, one row per stored table draw, paired with it; mean effects 0), their medians as
    the estimate, and the tests of the marginal likelihood against the fit's table (mean of its
    draws' logits): "no heterogeneity" (chi-bar-squared), each component alone, and the mean effect
    (does the average run follow the table? In a joint fit it should: the effects have mean 0)."""
    draws = np.asarray(draws, float).reshape(-1, 3)
    n_groups = len(np.unique(counts.group_index))
    x, k1, k0, starts_ = _run_rows(counts, _reference_logits(fit, counts, "mean_logit"))
    runs = _Runs(x, k1, k0, starts_, quadrature)
    med = np.median(draws, axis=0)
    th, ll, tests, lr_het, p_het, weights, lr_mean, p_mean = _tests(
        runs, [{"sd_b": max(med[0], 0.02), "sd_k": max(med[1], 0.02)}])
    tests.update(reference="mean_logit", rho_fitted=bool(np.any(draws[:, 2] != 0)),
                 marginal_estimate={k: float(v) for k, v in zip(SAMPLE_COLUMNS, th)})
    sample = np.column_stack([np.zeros((len(draws), 2)), draws])
    params = np.array([0.0, 0.0, math.log(med[0]) if med[0] > 0 else -np.inf,
                       math.log(med[1]) if med[1] > 0 else -np.inf, math.atanh(float(np.clip(med[2], -0.999, 0.999)))])
    return RunEffects(params=params, loglik=float(runs.loglik([0.0, 0.0, med[0], med[1], med[2]])),
                      loglik_null=_null(x, k1, k0), n_runs=n_groups, n_decisions=float(k1.sum() + k0.sum()),
                      share=share, sample=sample, kind="joint", lr_heterogeneity=lr_het, p_heterogeneity=p_het,
                      lr_mean=lr_mean, p_mean=p_mean, weights=weights, tests=tests)


def fit_run_effects(counts, table, *, share: str = "uniform", quadrature: int = QUADRATURE,
                    start: RunEffects | None = None, correlated: str | bool = "auto", grid: int = 15,
                    reference: str = "mean_logit", rng=0) -> RunEffects:
    """Estimate the between-run heterogeneity of a strategy from its runs' decision counts (the
    marginal fit: the table fixed, see the module docstring).

    Parameters
    ----------
    counts : normlab.calibration.StateCounts
        Decision counts per state, grouped by run (two names).
    table : StrategyFit, StrategyTable or array_like
        The fitted table the effects are relative to (a fit: the mean of its draws' logits).
    share : {"uniform", "none", "all"}, optional
        How predictions share a draw's effects within an experiment cell (see :class:`RunEffects`).
    quadrature : int, optional
        Gauss-Hermite nodes per dimension.
    start : RunEffects, optional
        An earlier estimate on similar runs (e.g. before a few runs were added): the optimiser
        starts there only, instead of from several default points.
    correlated : "auto", bool, optional
        Fit ``rho``: ``"auto"`` only when both standard deviations are distinguishable from 0
        (each one-component test at p < 0.05), by its profile likelihood on :data:`RHO_GRID`.
    grid : int, optional
        Points per standard deviation of the grid posterior (``grid x grid`` likelihoods).
    reference : {"mean_logit", "mean_table"}, optional
        The reference of a fit: the mean of its draws' logits (default) or its mean table (the
        choice before issue 32, flatter than every draw: a spurious mean sharpness).
    rng : optional
        Seeds the draws of :attr:`RunEffects.sample` (default 0: deterministic).

    Returns
    -------
    RunEffects
        :meth:`RunEffects.none` (with the reason) for fewer than three runs or other than two names.

    References
    ----------
    Pinheiro & Bates (1995); Gelman & Hill (2007), ch. 14; Self & Liang (1987); Kudo (1963).
    """
    if counts.n_names != 2:
        return RunEffects.none("run effects are estimated for two names only")
    n_groups = len(np.unique(counts.group_index))
    if n_groups < MIN_RUNS:
        return RunEffects.none(f"{n_groups} run(s): too few to tell runs apart")
    if correlated not in ("auto", True, False):
        raise ValueError(f"correlated must be 'auto', True or False; got {correlated!r}")
    if start is not None and not isinstance(start, RunEffects):
        raise TypeError(f"start must be a RunEffects; got {type(start).__name__}")
    grid = int(grid)
    if grid < 3:
        raise ValueError(f"grid must be >= 3; got {grid}")
    logit1 = _reference_logits(table, counts, reference)
    x, k1, k0, starts_ = _run_rows(counts, logit1)
    runs = _Runs(x, k1, k0, starts_, quadrature)
    if start is not None and start.active:
        inits = [{"mu_b": start.mu_b, "mu_k": start.mu_k, "sd_b": max(start.sd_b, 0.02), "sd_k": max(start.sd_k, 0.02)}]
    else:
        inits = [{"sd_b": 0.3, "sd_k": 0.1}, {"sd_b": 0.05, "sd_k": 0.05}]
    th, ll, tests, lr_het, p_het, weights, lr_mean, p_mean = _tests(runs, inits)
    tests["reference"] = reference
    p_b, p_k = tests["sd_b_alone"]["p_value"], tests["sd_k_alone"]["p_value"]
    # rho: profiled only where both standard deviations are there to correlate
    fit_rho = correlated is True or (correlated == "auto" and p_b < 0.05 and p_k < 0.05)
    rho_hat, rho_prof = 0.0, None
    if fit_rho:
        prof = []
        cur = dict(zip(SAMPLE_COLUMNS, th))
        for rv in RHO_GRID:  # the standard deviations re-fitted at each rho (the mean barely moves with it)
            t_r, l_r = _maximise(runs, ("sd_b", "sd_k"), {"mu_b": th[0], "mu_k": th[1], "rho": float(rv)}, [cur])
            prof.append(l_r)
            cur = dict(zip(SAMPLE_COLUMNS, t_r))
        prof = np.array(prof)
        j = int(np.argmax(prof))
        rho_hat = float(RHO_GRID[j])
        th, ll = _maximise(runs, ("mu_b", "mu_k", "sd_b", "sd_k"), {"rho": rho_hat}, [dict(zip(SAMPLE_COLUMNS, th))])
        inside = np.asarray(RHO_GRID)[prof >= prof.max() - 1.92]
        rho_prof = {"rho": list(RHO_GRID), "loglik": prof.tolist(), "estimate": rho_hat,
                    "low": float(inside.min()), "high": float(inside.max())}
        tests["rho_profile"] = rho_prof
    tests["rho_fitted"] = bool(fit_rho)
    # the grid posterior of (sd_b, sd_k): mean (and rho) at their estimates, HalfNormal(SD_PRIOR) priors
    g = as_generator(rng)
    sample, gridinfo = _grid_posterior(runs, th, ll, grid, g)
    tests["grid"] = gridinfo
    sample[:, 0:2] = _mean_draws(runs, th, len(sample), g)
    if rho_prof is not None:
        w = np.exp(np.asarray(rho_prof["loglik"]) - max(rho_prof["loglik"]))
        sample[:, 4] = np.asarray(RHO_GRID)[g.choice(len(RHO_GRID), size=len(sample), p=w / w.sum())]
    params = np.array([th[0], th[1], math.log(th[2]) if th[2] > 0 else -np.inf,
                       math.log(th[3]) if th[3] > 0 else -np.inf, math.atanh(rho_hat)])
    return RunEffects(params=params, loglik=float(ll), loglik_null=_null(x, k1, k0), n_runs=n_groups,
                      n_decisions=float(k1.sum() + k0.sum()), share=share, sample=sample, kind="marginal",
                      lr_heterogeneity=lr_het, p_heterogeneity=p_het, lr_mean=lr_mean, p_mean=p_mean,
                      weights=weights, tests=tests)


def _grid_posterior(runs: _Runs, th, ll, grid: int, g) -> tuple[np.ndarray, dict]:
    """:data:`SAMPLE_SIZE` draws of ``(sd_b, sd_k)`` from the marginal likelihood on a ``grid x grid``
    lattice from 0 to where it has fallen by 8 log units (mean and rho at ``th``), times half-normal
    priors; a cell drawn by its mass, then a uniform point in it."""
    his = []
    for i, cap in ((2, SD_BOUNDS[0]), (3, SD_BOUNDS[1])):
        hi = max(1.5 * th[i], 0.05)
        while hi < cap:
            t = list(th)
            t[i] = hi
            if runs.loglik(t) < ll - 8.0:
                break
            hi = min(hi * 1.6, cap)
        his.append(hi)
    xb, xk = np.linspace(0.0, his[0], grid), np.linspace(0.0, his[1], grid)
    lp = np.empty((grid, grid))
    for a, sb in enumerate(xb):
        for b, sk in enumerate(xk):
            lp[a, b] = runs.loglik([th[0], th[1], sb, sk, th[4]]) - 0.5 * (sb * sb + sk * sk) / SD_PRIOR ** 2
    w = np.exp(lp - lp.max()).ravel()
    w /= w.sum()
    cell = g.choice(w.size, size=SAMPLE_SIZE, p=w)
    a, b = np.unravel_index(cell, (grid, grid))
    hb, hk = xb[1] - xb[0], xk[1] - xk[0]
    ub, uk = g.random(SAMPLE_SIZE), g.random(SAMPLE_SIZE)
    # a point uniform in its cell: [x - h/2, x + h/2], the first [0, h/2]
    sb = np.where(a == 0, ub * hb / 2, xb[a] + (ub - 0.5) * hb)
    sk = np.where(b == 0, uk * hk / 2, xk[b] + (uk - 0.5) * hk)
    out = np.zeros((SAMPLE_SIZE, 5))
    out[:, 2], out[:, 3], out[:, 4] = sb, sk, th[4]
    return out, {"sd_b_max": his[0], "sd_k_max": his[1], "points": grid}


def _mean_draws(runs: _Runs, th, n: int, g) -> np.ndarray:
    """Draws of ``(mu_b, mu_k)`` from the normal approximation of the likelihood at its maximum (an
    interior point; standard deviations and rho held at their estimates)."""
    h = 1e-3

    def f(m):
        return runs.loglik([m[0], m[1], th[2], th[3], th[4]])

    m0 = np.array(th[:2], float)
    f0 = f(m0)
    H = np.zeros((2, 2))
    for i in range(2):
        for j in range(i, 2):
            ei, ej = np.eye(2)[i] * h, np.eye(2)[j] * h
            if i == j:
                H[i, i] = (f(m0 + ei) - 2 * f0 + f(m0 - ei)) / h ** 2
            else:
                H[i, j] = H[j, i] = (f(m0 + ei + ej) - f(m0 + ei - ej) - f(m0 - ei + ej) + f(m0 - ei - ej)) / (4 * h * h)
    try:
        C = np.linalg.inv(-H)
        Lm = np.linalg.cholesky((C + C.T) / 2)
    except np.linalg.LinAlgError:
        return np.tile(m0, (n, 1))
    return m0 + g.standard_normal((n, 2)) @ Lm.T


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
