"""Binary agreement with a committed minority (Xie et al. 2011): agents and mean field.

Two names A (held by a committed fraction ``p``) and B (the initial consensus of everyone else);
naming-game rules with inventories {A}, {B} or {A, B}. Above ``p_c ≈ 0.0979`` the committed
minority converts the whole population; below it a mixed state survives (mean field).

References
----------
J. Xie, S. Sreenivasan, G. Korniss, W. Zhang, C. Lim, B. K. Szymanski, Phys. Rev. E 84, 011130
(2011), Eqs. (1)-(2) (mean-field densities, time unit = N interactions) and the critical
fraction p_c = 0.09789.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normlab._display import html_card, new_axes, plain, plotting, short_repr
from normlab._validate import check_int

from .criteria import PUBLISHED_FLIP_THRESHOLD
from .naming_game import minimal_naming_game
from .results import GameResult


def xie_rhs(t, y, p):
    """Right-hand side of the mean-field equations for ``y = (n_A, n_B)`` (uncommitted densities).

    ``dn_A/dt = −n_A n_B + n_AB² + n_A n_AB + (3/2) p n_AB``,
    ``dn_B/dt = −n_A n_B + n_AB² + n_B n_AB − p n_B``, ``n_AB = 1 − p − n_A − n_B``.

    References
    ----------
    Implements Eqs. (1)-(2) of Xie et al., Phys. Rev. E 84, 011130 (2011).
    """
    nA, nB = y
    nAB = 1.0 - p - nA - nB
    return [
        -nA * nB + nAB * nAB + nA * nAB + 1.5 * p * nAB,
        -nA * nB + nAB * nAB + nB * nAB - p * nB,
    ]


@dataclass(frozen=True)
class MeanFieldTrajectory:
    """Solution of the Xie et al. mean-field equations.

    Attributes
    ----------
    p : float
        Committed fraction (holding A).
    t : numpy.ndarray
        Time in units of N interactions (population rounds).
    n_A, n_B, n_AB : numpy.ndarray
        Densities of uncommitted agents holding only A, only B, or both.
    """

    p: float
    t: np.ndarray
    n_A: np.ndarray
    n_B: np.ndarray
    n_AB: np.ndarray

    @property
    def total_A(self) -> np.ndarray:
        """Density of agents holding only A, committed included (``p + n_A``)."""
        return self.p + self.n_A

    def to_frame(self):
        """Long format: one row per time and state (``t``, ``state`` in {A, B, AB, A_total}, ``density``)."""
        import pandas as pd

        parts = []
        for label, val in (("A", self.n_A), ("B", self.n_B), ("AB", self.n_AB), ("A_total", self.total_A)):
            parts.append(pd.DataFrame({"t": self.t, "state": label, "density": val}))
        return pd.concat(parts, ignore_index=True)

    def summary(self) -> dict:
        """Committed fraction, final densities, and whether (and when) the B majority is gone
        (``n_B < 0.01``) within the integrated time."""
        gone = np.flatnonzero(self.n_B < 0.01)
        return plain({"p": self.p, "t_max": float(self.t[-1]), "final_A_total": float(self.total_A[-1]),
                      "final_B": float(self.n_B[-1]), "final_AB": float(self.n_AB[-1]),
                      "flipped": bool(gone.size), "flip_time": float(self.t[gone[0]]) if gone.size else None})

    def __repr__(self) -> str:
        s = self.summary()
        flip = f"B gone at t = {s['flip_time']:.3g}" if s["flipped"] else "B majority survives"
        return short_repr("MeanFieldTrajectory", f"p={self.p:.4g}", f"t in [0, {s['t_max']:g}]",
                          f"final A (incl. committed) {s['final_A_total']:.3f}", f"B {s['final_B']:.3f}",
                          f"AB {s['final_AB']:.3f}", flip)

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [("committed fraction p", self.p), ("final density of A (incl. committed)", s["final_A_total"]),
                ("final density of B", s["final_B"]), ("final density of AB", s["final_AB"]),
                ("time B falls below 1%", s["flip_time"] if s["flipped"] else "not within t_max")]
        return html_card("MeanFieldTrajectory", rows, subtitle="binary agreement, mean field (Xie et al. 2011)",
                         level=None, note="time in population rounds; .plot() draws the densities.")

    @plotting
    def plot(self, *, ax=None):
        """Densities of A only (committed included), B only and AB over time.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Xie et al., Phys. Rev. E 84, 011130 (2011), Eqs. (1)-(2), Fig. 1.
        """
        ax = new_axes(ax)
        ax.plot(self.t, self.total_A, lw=2, label="A (committed included)")
        ax.plot(self.t, self.n_B, lw=2, label="B")
        ax.plot(self.t, self.n_AB, lw=1.4, ls="--", label="A and B")
        ax.set(xlabel="time (population rounds)", ylabel="density", ylim=(-0.02, 1.02),
               title=f"binary agreement, mean field, p = {self.p:.4g}")
        ax.legend(fontsize=8)
        return ax

    @classmethod
    def _contract_example(cls) -> "MeanFieldTrajectory":
        """Five time points of a flip at ``p = 0.1``, literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(p=0.1, t=np.array([0.0, 1.0, 2.0, 3.0, 4.0]), n_A=np.array([0.0, 0.2, 0.5, 0.8, 0.9]),
                   n_B=np.array([0.9, 0.5, 0.2, 0.005, 0.0]), n_AB=np.array([0.0, 0.2, 0.2, 0.095, 0.0]))


def _check_p(p) -> float:
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"committed fraction p must be in [0, 1); got {p}")
    return p


def binary_agreement_ode(p: float, *, t_max: float = 100.0, n_A0: float = 0.0, n_B0: float | None = None,
                         n_points: int = 501) -> MeanFieldTrajectory:
    """Integrate the mean-field equations from ``(n_A0, n_B0)`` (default: all uncommitted on B).

    Parameters
    ----------
    p : float
        Committed fraction in [0, 1).
    t_max : float, optional
        Final time (units of N interactions).
    n_A0, n_B0 : float, optional
        Initial densities of uncommitted agents holding A only / B only (default ``n_B0 = 1 - p``).
    n_points : int, optional
        Output grid size.

    Returns
    -------
    MeanFieldTrajectory

    References
    ----------
    Implements Eqs. (1)-(2) of Xie et al., Phys. Rev. E 84, 011130 (2011).
    """
    from scipy.integrate import solve_ivp

    p = _check_p(p)
    n_B0 = 1.0 - p if n_B0 is None else float(n_B0)
    if n_A0 < 0 or n_B0 < 0 or n_A0 + n_B0 > 1 - p + 1e-12:
        raise ValueError("initial densities must be >= 0 with n_A0 + n_B0 <= 1 - p")
    if t_max <= 0:
        raise ValueError(f"t_max must be positive; got {t_max}")
    n_points = check_int(n_points, "n_points", low=2)
    t_eval = np.linspace(0.0, float(t_max), n_points)
    sol = solve_ivp(xie_rhs, (0.0, float(t_max)), [n_A0, n_B0], args=(p,), t_eval=t_eval,
                    method="LSODA", rtol=1e-10, atol=1e-12)
    nA, nB = sol.y
    return MeanFieldTrajectory(p, sol.t, nA, nB, 1.0 - p - nA - nB)


def _flips(p: float, t_end: float = 1e6) -> bool:
    """Does the B majority flip to A in mean field (n_B falls below 1e-3 before ``t_end``)?"""
    from scipy.integrate import solve_ivp

    def gone(t, y, p):
        return y[1] - 1e-3

    gone.terminal = True
    sol = solve_ivp(xie_rhs, (0.0, t_end), [0.0, 1.0 - p], args=(p,), events=gone, method="LSODA",
                    rtol=1e-10, atol=1e-13)
    return sol.status == 1


def critical_fraction(*, tol: float = 1e-7, bracket: tuple[float, float] = (0.05, 0.2)) -> float:
    """Mean-field critical committed fraction ``p_c`` of the binary agreement model, by bisection.

    Each bisection step integrates the mean-field equations from the B consensus and asks
    whether the majority flips.

    Parameters
    ----------
    tol : float, optional
        Width of the final bracket.
    bracket : (float, float), optional
        Initial bracket ``(p_low, p_high)``: no flip at ``p_low``, flip at ``p_high``.

    Returns
    -------
    float
        ``p_c ≈ 0.0979``.

    References
    ----------
    Xie et al., Phys. Rev. E 84, 011130 (2011): p_c = 0.09789.
    """
    lo, hi = map(float, bracket)
    if not 0 < lo < hi < 1:
        raise ValueError(f"bracket must satisfy 0 < low < high < 1; got {bracket}")
    if _flips(lo) or not _flips(hi):
        raise ValueError(f"bracket {bracket} does not contain the transition")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if _flips(mid):
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def consensus_time_mf(p: float, n_agents: int) -> float:
    """Mean-field time to consensus on A: when fewer than one agent (``n_B + n_AB < 1/N``) is left.

    Parameters
    ----------
    p : float
        Committed fraction; must exceed ``p_c`` (otherwise there is no mean-field consensus).
    n_agents : int

    Returns
    -------
    float
        Time in interactions (``N`` times the ODE time); grows like ``ln N`` above ``p_c``.

    References
    ----------
    Xie et al., Phys. Rev. E 84, 011130 (2011), Sec. III (T_c ∝ ln N for p > p_c).
    """
    from scipy.integrate import solve_ivp

    p = _check_p(p)
    N = check_int(n_agents, "n_agents", low=2)

    def done(t, y, p):
        return (1.0 - p - y[0]) - 1.0 / N

    done.terminal = True
    sol = solve_ivp(xie_rhs, (0.0, 1e6), [0.0, 1.0 - p], args=(p,), events=done, method="LSODA",
                    rtol=1e-10, atol=1e-13)
    if sol.status != 1:
        raise ValueError(f"p={p} is below the critical fraction: no mean-field consensus on A")
    return float(sol.t_events[0][0] * N)


def binary_agreement(n_agents: int, committed, *, n_runs: int = 1, graph=None, max_interactions=None,
                     stop: str = "consensus", names=("B", "A"), progress=None, rng=None) -> GameResult:
    """Agent simulation of binary agreement: the ``W = 2`` naming game with committed agents.

    Uncommitted agents start with the single name B (index 0); committed agents hold A (index 1)
    forever. Equivalent to :func:`~normlab.theory.minimal_naming_game` with ``n_words=2,
    initial="consensus"``.

    Parameters
    ----------
    n_agents : int
    committed : int, float or array_like of int
        Number of committed agents, a fraction in (0, 1) (rounded to the nearest count), or indices.
    n_runs : int, optional
    graph : networkx.Graph, optional
    max_interactions : int, optional
    stop : str, optional
        As in :func:`~normlab.theory.minimal_naming_game` (``"flip"`` is also available).
    names : (str, str), optional
        Labels of (majority name, committed name).
    progress : bool, optional
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, optional

    Returns
    -------
    GameResult

    References
    ----------
    Implements the agent model of Xie et al., Phys. Rev. E 84, 011130 (2011).
    """
    N = check_int(n_agents, "n_agents", low=2)
    if isinstance(committed, float):
        if not 0 < committed < 1:
            raise ValueError(f"a committed fraction must be in (0, 1); got {committed}")
        committed = int(round(committed * N))
    res = minimal_naming_game(N, n_words=2, n_runs=n_runs, graph=graph, committed=committed,
                              initial="consensus", max_interactions=max_interactions, stop=stop,
                              names=names, flip_threshold=PUBLISHED_FLIP_THRESHOLD, progress=progress, rng=rng)
    from dataclasses import replace

    return replace(res, model="binary_agreement")
