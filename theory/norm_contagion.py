"""Two-stage norm contagion: belief adoption by contact, then behavioural compliance with a lag.

A mathematical counterpart of the norm emergence of CRSEC [1]_ (Fig. 2, Appendix D: agents
"develop the norms in beliefs much faster than comply with them in behaviors"). Agents are
unaware (S), believe the norm without complying yet (B), or believe and comply (C). Norm
entrepreneurs are persistent seeds in C. In a step of length ``dt`` every S agent meets one
uniformly random other agent and, if that agent believes (B or C), adopts the belief with
probability ``1 - exp(-beta dt)``; every B agent starts complying with probability
``1 - exp(-gamma dt)`` (mean lag ``1/gamma``). Updates are synchronous.

Mean field for the believing fraction ``y`` and complying fraction ``c`` (``N`` agents; the
factor ``N/(N-1)`` counts partners among the others)::

    dy/dt = beta N/(N-1) y (1 - y)          (logistic: belief spreads by contact)
    dc/dt = gamma (y - c)                   (compliance relaxes towards belief)

so belief is the logistic ``y(t) = 1 / (1 + (1/y0 - 1) exp(-beta' t))`` and compliance its
exponentially lagged copy; ``beta / gamma`` is the rate ratio that
:func:`normlab.calibration.fit_adoption` measures on adoption curves.

References
----------
.. [1] S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
   Architecture", IJCAI 2024, §3.2 (Fig. 2b) and Appendix D.
.. [2] N. T. J. Bailey, *The Mathematical Theory of Infectious Diseases*, 1975, ch. 5 (the
   simple epidemic / logistic contagion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from normlab._jit import njit

from normlab._display import fmt, html_card, new_axes, plain, plotting, short_repr
from normlab._rng import run_seeds
from normlab._validate import check_int

from ._prng import PyXoshiro, _randbelow, _uniform


@njit(cache=True)
def _contagion_run(seed, n_agents, n_seeds, n_immune, p_b, p_c, n_steps, out_b, out_c):
    """One run; seeds are agents ``0 .. n_seeds-1``, immune ones the last ``n_immune`` (never
    updated, no draws). Stream order per step and agent ``i``: S -> ``randbelow(N-1)`` (partner)
    then ``uniform``; B (non-seed) -> ``uniform``."""
    s = seed.copy()
    state = np.zeros(n_agents, np.int8)
    for i in range(n_seeds):
        state[i] = 2
    old = state.copy()
    out_b[0] = n_seeds
    out_c[0] = n_seeds
    for k in range(n_steps):
        for i in range(n_agents):
            old[i] = state[i]
        for i in range(n_seeds, n_agents - n_immune):
            if old[i] == 0:
                j = _randbelow(s, n_agents - 1)
                if j >= i:
                    j += 1
                u = _uniform(s)
                if old[j] >= 1 and u < p_b:
                    state[i] = 1
            elif old[i] == 1:
                if _uniform(s) < p_c:
                    state[i] = 2
        nb = 0
        nc = 0
        for i in range(n_agents):
            if state[i] >= 1:
                nb += 1
            if state[i] == 2:
                nc += 1
        out_b[k + 1] = nb
        out_c[k + 1] = nc


def contagion_run_reference(seed_words, n_agents, n_seeds, p_b, p_c, n_steps, n_immune=0):
    """Pure-Python twin of the Numba kernel (same stream, same counts); small problems only."""
    rng = PyXoshiro(seed_words)
    state = [2] * n_seeds + [0] * (n_agents - n_seeds)
    bel, com = [n_seeds], [n_seeds]
    for _ in range(n_steps):
        old = list(state)
        for i in range(n_seeds, n_agents - n_immune):
            if old[i] == 0:
                j = rng.randbelow(n_agents - 1)
                j = j + 1 if j >= i else j
                u = rng.uniform()
                if old[j] >= 1 and u < p_b:
                    state[i] = 1
            elif old[i] == 1:
                if rng.uniform() < p_c:
                    state[i] = 2
        bel.append(sum(x >= 1 for x in state))
        com.append(sum(x == 2 for x in state))
    return bel, com


def _check_rate(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {v!r}")
    return float(v)


@dataclass(frozen=True)
class ContagionResult:
    """Replicated runs of :func:`norm_contagion_agents`.

    Attributes
    ----------
    t : numpy.ndarray
        Times (``0, dt, 2 dt, ...``).
    belief, compliance : numpy.ndarray
        Shape ``(n_runs, len(t))``: fractions of agents believing / complying (seeds included).
    n_agents, n_seeds, n_immune : int
    beta, gamma, dt : float
    """

    t: np.ndarray
    belief: np.ndarray = field(repr=False)
    compliance: np.ndarray = field(repr=False)
    n_agents: int = 0
    n_seeds: int = 0
    n_immune: int = 0
    beta: float = 0.0
    gamma: float = 0.0
    dt: float = 0.0

    def to_frame(self):
        """Long: ``run, t, measure (belief | compliance), proportion``."""
        import pandas as pd

        R, T = self.belief.shape
        parts = []
        for name, arr in (("belief", self.belief), ("compliance", self.compliance)):
            parts.append(pd.DataFrame({"run": np.repeat(np.arange(R), T), "t": np.tile(self.t, R),
                                       "measure": name, "proportion": arr.ravel()}))
        return pd.concat(parts, ignore_index=True)

    def ode(self, n_points: int = 401) -> "ContagionODE":
        """The mean-field solution for the same parameters and initial state."""
        y0 = self.n_seeds / self.n_agents
        return norm_contagion_ode(self.beta, self.gamma, y0=y0, c0=y0, t_max=float(self.t[-1]),
                                  n_agents=self.n_agents, ceiling=1.0 - self.n_immune / self.n_agents,
                                  n_points=n_points)

    @plotting
    def plot(self, ax=None, *, ode: bool = True):
        """Mean belief and compliance (bands: 10-90 % of runs) with the mean field.

        Returns
        -------
        matplotlib.axes.Axes
        """
        ax = new_axes(ax, (5.2, 3.6))
        for name, arr, c in (("belief", self.belief, "C0"), ("compliance", self.compliance, "C1")):
            ax.fill_between(self.t, *np.quantile(arr, [0.1, 0.9], axis=0), color=c, alpha=0.2, lw=0)
            ax.plot(self.t, arr.mean(axis=0), color=c, label=f"{name} (agents)")
        if ode:
            m = self.ode()
            ax.plot(m.t, m.belief, "k--", lw=1, label="mean field")
            ax.plot(m.t, m.compliance, "k--", lw=1)
        ax.set(xlabel="time", ylabel="fraction of agents", ylim=(-0.02, 1.02))
        ax.legend(frameon=False)
        return ax

    def summary(self) -> dict:
        """Settings and the final mean belief and compliance (plain Python numbers)."""
        return plain({"runs": self.belief.shape[0], "n_agents": self.n_agents, "n_seeds": self.n_seeds,
                      "n_immune": self.n_immune, "beta": self.beta, "gamma": self.gamma, "dt": self.dt,
                      "t_max": float(self.t[-1]), "final_belief": float(self.belief[:, -1].mean()),
                      "final_compliance": float(self.compliance[:, -1].mean())})

    def __repr__(self) -> str:
        return short_repr("ContagionResult", f"runs={self.belief.shape[0]}", f"N={self.n_agents}",
                          f"seeds={self.n_seeds}", f"beta={self.beta:g}", f"gamma={self.gamma:g}",
                          f"final belief={self.belief[:, -1].mean():.3f}",
                          f"final compliance={self.compliance[:, -1].mean():.3f}")

    def _repr_html_(self) -> str:
        b, c = self.belief[:, -1], self.compliance[:, -1]
        rows = [("final belief", float(b.mean()), tuple(np.quantile(b, [0.1, 0.9])), "mean; 10-90% of runs"),
                ("final compliance", float(c.mean()), tuple(np.quantile(c, [0.1, 0.9])), "mean; 10-90% of runs")]
        return html_card("ContagionResult", rows, level=None,
                         subtitle=f"two-stage norm contagion, {self.belief.shape[0]} runs",
                         settings={"N": self.n_agents, "seeds": self.n_seeds, "immune": self.n_immune,
                                   "beta": self.beta, "gamma": self.gamma, "t_max": float(self.t[-1])},
                         note=".plot() draws belief and compliance with the mean field.")

    @classmethod
    def _contract_example(cls) -> "ContagionResult":
        """Two runs of ten agents over five steps, literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(t=np.arange(5) * 0.5, belief=np.array([[0.1, 0.2, 0.4, 0.6, 0.7], [0.1, 0.1, 0.3, 0.5, 0.8]]),
                   compliance=np.array([[0.1, 0.1, 0.2, 0.4, 0.5], [0.1, 0.1, 0.1, 0.3, 0.6]]), n_agents=10, n_seeds=1,
                   n_immune=0, beta=1.0, gamma=0.5, dt=0.5)


def norm_contagion_agents(n_agents: int, n_seeds: int, beta: float, gamma: float, *, n_immune: int = 0,
                   t_max: float = 10.0, dt: float = 0.05, n_runs: int = 1, rng=None) -> ContagionResult:
    """Agent-based two-stage contagion (belief by contact, compliance after a lag).

    Parameters
    ----------
    n_agents : int
        Population size (>= 2).
    n_seeds : int
        Norm entrepreneurs: persistent believers who comply from the start (1 .. n_agents).
    beta : float
        Belief adoption rate per contact with a believer.
    gamma : float
        Rate at which a believer starts complying (mean lag ``1/gamma``).
    n_immune : int
        Agents who never adopt the norm (belief ceiling ``1 - n_immune / n_agents``).
    t_max, dt : float
        Duration and step.
    n_runs : int
    rng : None, int, SeedSequence or Generator
        Run ``k`` uses child ``k`` (reproducible alone).

    Returns
    -------
    ContagionResult

    References
    ----------
    Ren et al., IJCAI 2024, Appendix D (belief before compliance); Bailey 1975, ch. 5.
    """
    N = check_int(n_agents, "n_agents", low=2)
    S = check_int(n_seeds, "n_seeds", low=1, high=N)
    M = check_int(n_immune, "n_immune", low=0, high=N - S)
    beta, gamma = _check_rate(beta, "beta"), _check_rate(gamma, "gamma")
    R = check_int(n_runs, "n_runs", low=1)
    if not (isinstance(dt, (int, float)) and dt > 0 and isinstance(t_max, (int, float)) and t_max >= dt):
        raise ValueError(f"need dt > 0 and t_max >= dt; got dt={dt!r}, t_max={t_max!r}")
    n_steps = int(round(t_max / dt))
    _, seeds = run_seeds(rng, R)
    p_b, p_c = 1.0 - math.exp(-beta * dt), 1.0 - math.exp(-gamma * dt)
    bel = np.empty((R, n_steps + 1), np.int64)
    com = np.empty((R, n_steps + 1), np.int64)
    for r in range(R):
        _contagion_run(seeds[r], N, S, M, p_b, p_c, n_steps, bel[r], com[r])
    return ContagionResult(t=np.arange(n_steps + 1) * float(dt), belief=bel / N, compliance=com / N,
                           n_agents=N, n_seeds=S, n_immune=M, beta=beta, gamma=gamma, dt=float(dt))


@dataclass(frozen=True)
class ContagionODE:
    """Mean-field trajectory of the two-stage contagion (``belief`` = y, ``compliance`` = c)."""

    t: np.ndarray
    belief: np.ndarray
    compliance: np.ndarray
    beta: float
    gamma: float

    def time_to(self, level: float, measure: str = "belief") -> float:
        """First time the measure reaches ``level`` (linear interpolation; NaN if never)."""
        y = self.belief if measure == "belief" else self.compliance
        idx = np.nonzero(y >= level)[0]
        if not len(idx):
            return math.nan
        k = idx[0]
        if k == 0:
            return float(self.t[0])
        return float(self.t[k - 1] + (level - y[k - 1]) * (self.t[k] - self.t[k - 1]) / (y[k] - y[k - 1]))

    def to_frame(self):
        import pandas as pd

        return pd.concat([pd.DataFrame({"t": self.t, "measure": m, "proportion": v})
                          for m, v in (("belief", self.belief), ("compliance", self.compliance))], ignore_index=True)

    def summary(self) -> dict:
        """Rates, final belief and compliance, and the times to 50% (plain Python; None: not reached)."""
        t50 = {m: self.time_to(0.5, m) for m in ("belief", "compliance")}
        return plain({"beta": self.beta, "gamma": self.gamma, "t_max": float(self.t[-1]),
                      "final_belief": float(self.belief[-1]), "final_compliance": float(self.compliance[-1]),
                      **{f"time_to_half_{m}": None if math.isnan(v) else v for m, v in t50.items()}})

    def __repr__(self) -> str:
        return short_repr("ContagionODE", f"beta={self.beta:g}", f"gamma={self.gamma:g}",
                          f"t in [0, {float(self.t[-1]):g}]", f"final belief={float(self.belief[-1]):.3f}",
                          f"final compliance={float(self.compliance[-1]):.3f}",
                          f"half belief at t={fmt(self.time_to(0.5))}")

    def _repr_html_(self) -> str:
        rows = [("final belief", float(self.belief[-1])), ("final compliance", float(self.compliance[-1])),
                ("time to 50% belief", self.time_to(0.5)), ("time to 50% compliance", self.time_to(0.5, "compliance"))]
        return html_card("ContagionODE", rows, level=None, subtitle="two-stage norm contagion, mean field",
                         settings={"beta": self.beta, "gamma": self.gamma})

    @plotting
    def plot(self, *, ax=None):
        """Belief and compliance over time.

        Returns
        -------
        matplotlib.axes.Axes
        """
        ax = new_axes(ax, (5.2, 3.6))
        ax.plot(self.t, self.belief, label="belief")
        ax.plot(self.t, self.compliance, label="compliance")
        ax.set(xlabel="time", ylabel="fraction of agents", ylim=(-0.02, 1.02),
               title=f"mean field, beta = {self.beta:g}, gamma = {self.gamma:g}")
        ax.legend()
        return ax

    @classmethod
    def _contract_example(cls) -> "ContagionODE":
        """Five time points, literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(t=np.arange(5) * 0.5, belief=np.array([0.1, 0.25, 0.45, 0.65, 0.8]),
                   compliance=np.array([0.1, 0.15, 0.3, 0.45, 0.6]), beta=1.0, gamma=0.5)


def contagion_rhs(t, z, beta, gamma, factor=1.0, ceiling=1.0):
    """Right-hand side ``(dy/dt, dc/dt) = (beta f y (K - y), gamma (y - c))``."""
    y, c = z
    return [beta * factor * y * (ceiling - y), gamma * (y - c)]


def norm_contagion_ode(beta: float, gamma: float, *, y0: float, c0: float | None = None, t_max: float = 10.0,
                       n_agents: int | None = None, ceiling: float = 1.0, t_eval=None,
                       n_points: int = 401) -> ContagionODE:
    """Integrate the mean-field equations of the two-stage contagion.

    Parameters
    ----------
    beta, gamma : float
    y0 : float
        Initial believing fraction in (0, 1] (the entrepreneurs' share at least).
    c0 : float, optional
        Initial complying fraction (default ``y0``: only seeds, who comply), ``0 <= c0 <= y0``.
    t_max : float
    n_agents : int, optional
        Finite population: multiplies the contact rate by ``N/(N-1)`` (partners among others).
    ceiling : float
        Largest believing fraction ``K`` (``1 - n_immune / N``), ``y0 <= K <= 1``.
    t_eval : array_like, optional
        Output times (default ``n_points`` from 0 to ``t_max``).

    Returns
    -------
    ContagionODE

    References
    ----------
    Ren et al., IJCAI 2024, Appendix D; Bailey 1975, ch. 5 (logistic solution).
    """
    from scipy.integrate import solve_ivp

    beta, gamma = _check_rate(beta, "beta"), _check_rate(gamma, "gamma")
    y0 = float(y0)
    c0 = y0 if c0 is None else float(c0)
    K = float(ceiling)
    if not (0.0 < y0 <= K <= 1.0 and 0.0 <= c0 <= y0 + 1e-12):
        raise ValueError(f"need 0 < y0 <= ceiling <= 1 and 0 <= c0 <= y0; got y0={y0}, c0={c0}, ceiling={K}")
    factor = 1.0 if n_agents is None else check_int(n_agents, "n_agents", low=2) / (n_agents - 1.0)
    t_eval = np.linspace(0.0, float(t_max), int(n_points)) if t_eval is None else np.asarray(t_eval, float)
    if t_eval.ndim != 1 or len(t_eval) < 1 or np.any(np.diff(t_eval) < 0) or t_eval[0] < 0:
        raise ValueError("t_eval must be a non-decreasing 1-d array of times >= 0")
    t_end = max(float(t_eval[-1]), 1e-12)
    sol = solve_ivp(contagion_rhs, (0.0, t_end), [y0, c0], args=(beta, gamma, factor, K), t_eval=t_eval,
                    method="LSODA", rtol=1e-9, atol=1e-12)
    return ContagionODE(t=t_eval, belief=sol.y[0], compliance=sol.y[1], beta=beta, gamma=gamma)


def logistic_belief(t, beta: float, y0: float, factor: float = 1.0, ceiling: float = 1.0) -> np.ndarray:
    """Closed form of the belief equation: ``K / (1 + (K/y0 - 1) exp(-beta f K t))``."""
    t = np.asarray(t, float)
    K = float(ceiling)
    return K / (1.0 + (K / y0 - 1.0) * np.exp(-beta * factor * K * t))
