"""Fit the two-stage norm contagion to adoption curves: belief and compliance rates and their ratio.

Given the proportion of agents holding a norm (belief) and complying with it (behaviour) over
time -- from a CRSEC population run (:meth:`normlab.llm_runs.crsec.PopulationRun.adoption`), a
published run, or any tidy frame -- :func:`fit_adoption` estimates ``beta`` (belief spreading) and
``gamma`` (compliance after belief) and the belief ceiling ``K`` of the mean field of
:mod:`normlab.theory.norm_contagion` by binomial maximum likelihood, and the rate ratio ``beta / gamma`` with a parametric-bootstrap
interval: replicate populations are simulated with the agent-based model at the fitted rates and
refitted, so the interval includes the autocorrelation of adoption curves. A ratio above 1 is
"belief spreads faster than compliance" (Appendix D of Ren et al.) as a measured number.

References
----------
S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
Architecture", IJCAI 2024, Fig. 2b and Appendix D; B. Efron, R. Tibshirani, *An Introduction to
the Bootstrap*, 1993, ch. 6 and 13 (parametric bootstrap, percentile intervals).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import html_card, new_axes, plain, plotting
from normlab._rng import spawn
from normlab._validate import check_int
from normlab.theory import norm_contagion_agents, norm_contagion_ode
from normlab.theory.norm_contagion import logistic_belief


@dataclass(frozen=True)
class AdoptionFit:
    """Fitted two-stage contagion.

    Attributes
    ----------
    beta, gamma : float
        Rates per time unit of the input (e.g. per minute).
    ratio : float
        ``beta / gamma``.
    ceiling : float
        Largest believing fraction ``K``.
    ci : dict
        ``{"beta", "gamma", "ratio", "ceiling"}`` -> ``(lo, hi)`` (percentile bootstrap).
    level : float
    y0, c0 : float
        Initial belief and compliance used.
    n_agents : int
    t, belief, compliance : numpy.ndarray
        The data fitted.
    boot : numpy.ndarray
        Bootstrap estimates, shape ``(n_boot, 3)`` (beta, gamma, ceiling).
    at_bound : dict
        ``{"beta": bool, "gamma": bool}``: the estimate sits at a bound of :data:`RATE_BOUNDS`
        (the data do not bound it; e.g. no compliance at all puts gamma at its lower bound).
    """

    beta: float
    gamma: float
    ratio: float
    ceiling: float
    ci: dict
    level: float
    y0: float
    c0: float
    n_agents: int
    t: np.ndarray = field(repr=False)
    belief: np.ndarray = field(repr=False)
    compliance: np.ndarray = field(repr=False)
    boot: np.ndarray = field(repr=False)
    at_bound: dict = field(default_factory=dict, repr=False)

    def reading(self) -> str:
        """What the fitted ratio supports, as a sentence generated from the numbers (for titles
        and captions): belief faster than compliance only when the whole interval lies above 1,
        compliance keeping pace or faster when it lies below 1, no order otherwise.

        References
        ----------
        Ren et al., IJCAI 2024, Appendix D ("belief before compliance").
        """
        lo, hi = self.ci["ratio"]
        txt = f"beta/gamma = {self.ratio:.2g}"
        if self.at_bound.get("gamma") and self.gamma * max(float(self.t[-1]), 1e-9) < 1e-3:
            return (f"compliance did not follow belief within the data (gamma at its lower bound; {txt} is not "
                    "bounded above)")
        if self.at_bound.get("beta") or self.at_bound.get("gamma"):
            txt += " (a rate at its bound: the data do not pin it down)"
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return f"{txt}, no interval (n_boot = 0): no conclusion about the order"
        B = len(self.boot)
        # the count of replicates travels with every interval: 8 refits (the notebook's quick run) bound
        # a 95% percentile interval by little more than their extremes
        iv = f"[{lo:.2g}, {hi:.2g}] at {self.level:.0%} from {B} bootstrap replicate{'s' if B != 1 else ''}"
        if lo > 1:
            return f"belief spread faster than compliance: {txt} {iv}, the whole interval above 1"
        if hi < 1:
            return f"compliance kept pace with belief rather than lagging: {txt} {iv}, the whole interval below 1"
        return f"no clear order of belief and compliance: {txt} {iv} includes 1"

    def to_frame(self) -> pd.DataFrame:
        """Long: ``parameter, estimate, lo, hi``."""
        return pd.DataFrame([(k, getattr(self, k), *self.ci[k]) for k in ("beta", "gamma", "ratio", "ceiling")],
                            columns=["parameter", "estimate", "lo", "hi"])

    def predict(self, t=None):
        """Mean-field curves at the fitted rates (:class:`normlab.theory.ContagionODE`)."""
        t = self.t if t is None else np.asarray(t, float)
        return norm_contagion_ode(self.beta, self.gamma, y0=self.y0, c0=self.c0, t_eval=t, n_agents=self.n_agents,
                                  ceiling=self.ceiling)

    def summary(self) -> dict:
        """Rates, ratio and ceiling with their bootstrap intervals (plain Python)."""
        return plain({"beta": self.beta, "gamma": self.gamma, "ratio": self.ratio, "ceiling": self.ceiling,
                      "level": self.level, "ci": {k: list(v) for k, v in self.ci.items()}, "n_agents": self.n_agents,
                      "n_boot": int(len(self.boot)), "at_bound": dict(self.at_bound), "reading": self.reading()})

    @plotting
    def plot(self, ax=None):
        """Data and fitted mean field.

        Returns
        -------
        matplotlib.axes.Axes
        """
        ax = new_axes(ax, (5.2, 3.6))
        m = self.predict(np.linspace(0, self.t.max(), 300))
        ax.plot(self.t, self.belief, "o", ms=3, color="C0", label="belief (data)")
        ax.plot(self.t, self.compliance, "s", ms=3, color="C1", label="compliance (data)")
        ax.plot(m.t, m.belief, color="C0", label="belief (fit)")
        ax.plot(m.t, m.compliance, color="C1", label="compliance (fit)")
        lo, hi = self.ci["ratio"]
        ax.set(xlabel="time", ylabel="fraction of agents", ylim=(-0.02, 1.02),
               title=f"beta/gamma = {self.ratio:.2g} [{lo:.2g}, {hi:.2g}] ({len(self.boot)} bootstrap replicates)")
        ax.legend(frameon=False, fontsize=8)
        return ax

    def __repr__(self) -> str:
        lo, hi = self.ci["ratio"]
        return (f"AdoptionFit(beta={self.beta:.4g}, gamma={self.gamma:.4g}, ratio={self.ratio:.3g} "
                f"[{lo:.3g}, {hi:.3g}] at {self.level:.0%} from {len(self.boot)} bootstrap replicates, "
                f"ceiling={self.ceiling:.3g})")

    def _repr_html_(self) -> str:
        rows = [(k, getattr(self, k), tuple(self.ci[k])) for k in ("beta", "gamma", "ratio", "ceiling")]
        return html_card("AdoptionFit", rows, level=self.level, subtitle="two-stage contagion fitted to adoption curves",
                         settings={"N": self.n_agents, "bootstrap replicates": len(self.boot)},
                         note="ratio = beta / gamma (> 1: belief spreads faster than compliance); .plot() draws the fit.")

    @classmethod
    def _contract_example(cls) -> "AdoptionFit":
        """Rates and bootstrap intervals of a ten-agent population over five time points, literal
        numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(beta=1.0, gamma=0.5, ratio=2.0, ceiling=0.9,
                   ci={"beta": (0.7, 1.4), "gamma": (0.3, 0.8), "ratio": (1.2, 3.5), "ceiling": (0.8, 1.0)}, level=0.95,
                   y0=0.1, c0=0.1, n_agents=10, t=np.arange(5.0), belief=np.array([0.1, 0.3, 0.6, 0.8, 0.9]),
                   compliance=np.array([0.1, 0.15, 0.3, 0.5, 0.7]), boot=np.array([[1.0, 0.5, 0.9], [1.2, 0.6, 0.85]]),
                   at_bound={"beta": False, "gamma": False})


def _mean_field(t, beta, gamma, y0, c0, n, ceiling=1.0):
    """Belief (closed-form logistic) and compliance (the linear equation ``c' = gamma (y - c)``
    integrated exactly for piecewise-constant ``y`` on a fine grid, as a stable IIR filter) at
    times ``t`` -- fast enough for bootstrap refits."""
    from scipy.signal import lfilter

    f = n / (n - 1.0)
    grid = np.linspace(0.0, float(t[-1]), 1601)
    y = logistic_belief(grid, beta, y0, f, ceiling)
    a = math.exp(-gamma * (grid[1] - grid[0]))
    ymid = 0.5 * (y[1:] + y[:-1])
    c_rest, _ = lfilter([1.0 - a], [1.0, -a], ymid, zi=[a * c0])
    c = np.concatenate([[c0], c_rest])
    return np.interp(t, grid, y), np.interp(t, grid, c)


def _unpack(x, y0, fit_ceiling, ceiling):
    beta, gamma = np.exp(x[:2])
    K = y0 + (1.0 - y0) / (1.0 + np.exp(-x[2])) if fit_ceiling else ceiling
    return beta, gamma, K


def _nll(x, t, kb, kc, n, y0, c0, fit_ceiling, ceiling):
    beta, gamma, K = _unpack(x, y0, fit_ceiling, ceiling)
    pb, pc = _mean_field(t, beta, gamma, y0, c0, n, K)
    pb = np.clip(pb, 1e-9, 1 - 1e-9)
    pc = np.clip(pc, 1e-9, 1 - 1e-9)
    return -float(np.sum(kb * np.log(pb) + (n - kb) * np.log1p(-pb) + kc * np.log(pc) + (n - kc) * np.log1p(-pc)))


#: Rates are estimated within ``[RATE_BOUNDS[0], RATE_BOUNDS[1]]`` per time span of the data: a
#: rate the data do not bound (no compliance at all: gamma -> 0; compliance at once: gamma -> inf)
#: stops at a bound instead of 0 or infinity, so the ratio stays a finite number and the bootstrap
#: simulation a bounded size; :attr:`AdoptionFit.at_bound` says which estimate sits there.
RATE_BOUNDS = (1e-6, 1e3)


def _bounds(t, fit_ceiling):
    span = max(float(t[-1] - t[0]), 1e-9)
    lo, hi = math.log(RATE_BOUNDS[0] / span), math.log(RATE_BOUNDS[1] / span)
    return [(lo, hi), (lo, hi)] + ([(None, None)] if fit_ceiling else [])


def _mle(t, belief, compliance, n, y0, c0, fit_ceiling=False, ceiling=1.0):
    from scipy.optimize import minimize

    kb, kc = belief * n, compliance * n
    span = max(float(t[-1] - t[0]), 1e-9)
    best = None
    for g in (0.3, 3.0):  # two starts on the data's time scale
        x0 = [math.log(5.0 / span), math.log(g * 5.0 / span)]
        if fit_ceiling:
            top = min(max(float(belief.max()), y0 + 1e-3), 1 - 1e-3)
            q = (top - y0) / (1.0 - y0)
            x0.append(math.log(q / (1 - q)) if 0 < q < 1 else 0.0)
        res = minimize(_nll, np.array(x0), args=(t, kb, kc, n, y0, c0, fit_ceiling, ceiling),
                       method="Nelder-Mead", bounds=_bounds(t, fit_ceiling),
                       options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 600})
        if best is None or res.fun < best.fun:
            best = res
    return _unpack(best.x, y0, fit_ceiling, ceiling)


def _curves(adoption, topic, behaviour):
    need = {"t", "measure", "proportion"}
    if not isinstance(adoption, pd.DataFrame) or not need <= set(adoption.columns):
        raise ValueError(f"adoption must be a DataFrame with columns {sorted(need)} (and topic)")
    df = adoption
    if "topic" in df.columns:
        topics = df["topic"].dropna().unique()
        if topic is None and len(topics) > 1:
            raise ValueError(f"adoption holds topics {sorted(topics)}; pass topic=")
        if topic is not None:
            if topic not in topics:
                raise ValueError(f"topic {topic!r} not in the adoption frame; it has {sorted(topics)}")
            df = df[df["topic"] == topic]
    measures = set(df["measure"])
    if "belief" not in measures or behaviour not in measures:
        raise ValueError(f"adoption needs measures 'belief' and {behaviour!r}; it has {sorted(measures)}")
    w = df.pivot_table(index="t", columns="measure", values="proportion", aggfunc="mean").sort_index()
    return w.index.to_numpy(float), w["belief"].to_numpy(float), w[behaviour].to_numpy(float)


def fit_adoption(adoption: pd.DataFrame, *, n_agents: int, topic: str | None = None, behaviour: str = "action",
                 ceiling="fit", n_boot: int = 200, level: float = 0.95, rng=None) -> AdoptionFit:
    """Fit belief and compliance rates of the two-stage contagion to adoption curves.

    Parameters
    ----------
    adoption : pandas.DataFrame
        Long frame ``t, measure, proportion`` (``topic`` optional), e.g. from
        :func:`normlab.llm_runs.crsec.adoption_curves`; several runs are averaged per time.
    n_agents : int
        Population size (binomial denominator and finite-size factor).
    topic : str, optional
        Which topic, when the frame holds several.
    behaviour : str
        The behaviour measure: ``"action"`` (default), ``"plan"`` or ``"compliance"``.
    ceiling : "fit" or float
        Largest believing fraction ``K`` (agents never persuaded make it < 1): estimated
        (default) or fixed (``1.0``: everybody adopts eventually).
    n_boot : int
        Parametric-bootstrap replicates (agent-based simulations at the fitted rates); 0 skips
        the interval (NaN bounds).
    level : float
        Interval level.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    AdoptionFit

    References
    ----------
    Ren et al., IJCAI 2024, Appendix D; Efron & Tibshirani 1993, ch. 6 and 13.
    """
    N = check_int(n_agents, "n_agents", low=2)
    B = check_int(n_boot, "n_boot", low=0)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level!r}")
    t, belief, comp = _curves(adoption, topic, behaviour)
    if len(t) < 3:
        raise ValueError(f"need at least 3 time points; got {len(t)}")
    if np.any((belief < 0) | (belief > 1) | (comp < 0) | (comp > 1)):
        raise ValueError("proportions must lie in [0, 1]")
    t = t - t[0]
    y0 = float(max(belief[0], 1.0 / N))
    c0 = float(min(comp[0], y0))
    if y0 >= 1.0:
        raise ValueError("everybody believes at the first time point: nothing to fit")
    fit_k = isinstance(ceiling, str)
    if fit_k and ceiling != "fit":
        raise ValueError(f"ceiling must be 'fit' or a number in [y0, 1]; got {ceiling!r}")
    K0 = 1.0 if fit_k else float(ceiling)
    if not fit_k and not y0 <= K0 <= 1.0:
        raise ValueError(f"ceiling must lie in [{y0:g}, 1]; got {ceiling!r}")
    beta, gamma, K = _mle(t, belief, comp, N, y0, c0, fit_k, K0)
    span = max(float(t[-1]), 1e-9)
    at_bound = {k: bool(np.isclose(v, RATE_BOUNDS[0] / span, rtol=1e-3) or np.isclose(v, RATE_BOUNDS[1] / span,
                                                                                        rtol=1e-3))
                for k, v in (("beta", beta), ("gamma", gamma))}
    boot = np.full((B, 3), np.nan)
    if B:
        n_seeds = max(1, int(round(y0 * N)))
        n_immune = min(N - n_seeds, int(round((1.0 - K) * N)))
        step = float(np.min(np.diff(t)))
        dt = step / max(1, int(math.ceil(step * max(beta * K, gamma) / 0.05)))
        sim = norm_contagion_agents(N, n_seeds, beta, gamma, n_immune=n_immune, t_max=float(t[-1]), dt=dt, n_runs=B,
                             rng=spawn(rng, 1)[0])
        for b in range(B):
            yb = np.interp(t, sim.t, sim.belief[b])
            cb = np.interp(t, sim.t, sim.compliance[b])
            boot[b] = _mle(t, yb, cb, N, y0, min(cb[0], y0), fit_k, K0)
    a = (1 - level) / 2
    if B:
        q = lambda x: tuple(float(v) for v in np.quantile(x, [a, 1 - a]))  # noqa: E731
        ci = {"beta": q(boot[:, 0]), "gamma": q(boot[:, 1]), "ratio": q(boot[:, 0] / boot[:, 1]),
              "ceiling": q(boot[:, 2])}
    else:
        ci = {k: (math.nan, math.nan) for k in ("beta", "gamma", "ratio", "ceiling")}
    return AdoptionFit(beta=float(beta), gamma=float(gamma), ratio=float(beta) / float(gamma), ceiling=float(K), ci=ci,
                       level=level, y0=y0, c0=c0, n_agents=N, t=t, belief=belief, compliance=comp, boot=boot,
                       at_bound=at_bound)
