"""The memory-H strategy game when agents sometimes give no valid answer.

An LLM agent asked in the paper's sample protocol with a cap on re-asks can end a decision
without a pool name. normlab's runners (and the published code) then count the interaction as a
failure and write it into neither memory. With a per-state probability ``invalid[s]`` of such an
answer and ``table[s]`` the distribution of the *valid* answers, the population is again a Markov
chain -- but not the one of :func:`normlab.theory.strategy_game`: an invalid side turns the
interaction into a failed no-op, so agents whose memory states often produce invalid answers
interact (effectively) less, convergence slows down by about ``1 / (1 - invalid)^2``, and the
success rate can never exceed ``(1 - invalid)^2`` at consensus -- a ``3N`` success streak (the
published stop rule) may never happen.

:func:`invalid_answer_game` simulates that chain for many tables at once (one table per run
group: posterior draws), vectorised over runs in NumPy. With ``invalid = 0`` it is the chain of
:func:`~normlab.theory.strategy_game` (tested statistically).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods
(prompting, answer parsing; re-asks until a pool name appears), Table S4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normlab._rng import as_generator
from normlab._validate import check_int

from .strategies import n_states, state_offsets

__all__ = ["InvalidAnswerGame", "invalid_answer_game"]


STOPS = ("max", "streak", "consensus")


@dataclass(frozen=True)
class InvalidAnswerGame:
    """Runs of the memory game with invalid answers (``D`` tables x ``n_runs`` runs each).

    Attributes
    ----------
    names : tuple of str
    n_agents, memory, n_runs, max_interactions : int
    stop : str
    group : numpy.ndarray, shape (D * n_runs,)
        Table (draw) index of each run.
    success, valid : numpy.ndarray, shape (D * n_runs, n_rounds)
        Success rate and share of valid decisions per population round (``N`` interactions);
        NaN after the run stopped.
    stop_time : numpy.ndarray
        Interactions played (the stop time, or ``max_interactions``).
    stopped : numpy.ndarray of bool
        The stop rule ended the run (not the cap).
    winner : numpy.ndarray
        Name index the run ended on: the name of the final ``3N`` streak (``stop="streak"``),
        of the memory consensus (``"consensus"``); -1 when the cap ended it.
    consensus_time : numpy.ndarray
        First interaction count at which every memory holds ``H`` successful plays of one name
        (NaN if never before the run ended); ``consensus_name`` its index (-1).
    streak_time : numpy.ndarray
        Interactions until ``3N`` consecutive successes were first completed (NaN if never).
    decisions, valid_decisions, successes : numpy.ndarray
        Counts over the run.
    cost : numpy.ndarray
        Sum over the run's decisions of ``cost[s]`` (e.g. expected requests per decision).

    References
    ----------
    A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods.
    """

    names: tuple
    n_agents: int
    memory: int
    n_runs: int
    max_interactions: int
    stop: str
    group: np.ndarray
    success: np.ndarray
    valid: np.ndarray
    stop_time: np.ndarray
    stopped: np.ndarray
    winner: np.ndarray
    consensus_time: np.ndarray
    consensus_name: np.ndarray
    streak_time: np.ndarray
    decisions: np.ndarray
    valid_decisions: np.ndarray
    successes: np.ndarray
    cost: np.ndarray

    def __repr__(self) -> str:
        return (f"InvalidAnswerGame(N={self.n_agents}, H={self.memory}, {len(self.group)} runs, stop={self.stop!r}: "
                f"{np.mean(self.stopped):.0%} stopped, valid decisions {self.valid_decisions.sum() / max(self.decisions.sum(), 1):.0%})")

    def to_frame(self):
        """One row per run: ``run``, ``group``, ``stop_time``, ``stop_rounds``, ``stopped``,
        ``winner`` (``"none"``: cap), ``consensus_rounds``, ``streak_rounds``, ``decisions``,
        ``valid_share``, ``success_rate``, ``cost_per_decision``."""
        import pandas as pd

        lab = np.array(list(self.names) + ["none"], dtype=object)
        with np.errstate(invalid="ignore", divide="ignore"):
            return pd.DataFrame({
                "run": np.arange(len(self.group)), "group": self.group, "stop_time": self.stop_time,
                "stop_rounds": self.stop_time / self.n_agents, "stopped": self.stopped, "winner": lab[self.winner],
                "consensus_rounds": self.consensus_time / self.n_agents, "streak_rounds": self.streak_time / self.n_agents,
                "decisions": self.decisions, "valid_share": self.valid_decisions / self.decisions,
                "success_rate": self.successes / (self.decisions / 2), "cost_per_decision": self.cost / self.decisions,
            })


def invalid_answer_game(tables, invalid, *, n_agents: int, memory: int, n_runs: int, max_interactions: int,
                        stop: str = "max", cost=None, names=None, rng=None) -> InvalidAnswerGame:
    """Play the memory game with state-dependent invalid answers, from empty memories.

    Each interaction picks an ordered pair of distinct agents uniformly; each side is invalid
    with probability ``invalid[d, s]`` (``s`` its memory state), else draws a name from
    ``tables[d, s]``. Both valid and equal: a success, written into both memories. Otherwise a
    failure; it is written into the memories only when both sides are valid (as the LLM
    runners do).

    Parameters
    ----------
    tables : array_like, shape (D, S, W) or (S, W)
        Distribution of the valid answers per memory state (the encoding of
        :mod:`normlab.theory.strategies`), one table per draw.
    invalid : array_like, shape (D, S) or (S,)
        Probability that a decision in state ``s`` gives no valid answer.
    n_agents, memory : int
    n_runs : int
        Runs per table.
    max_interactions : int
    stop : {"max", "streak", "consensus"}, optional
        ``"streak"``: ``3N`` consecutive successes (the published runs); ``"consensus"``: every
        memory holds ``H`` successful plays of one name; ``"max"``: run to the cap.
    cost : array_like, shape (D, S) or (S,), optional
        A per-decision quantity summed over each run (e.g. expected requests per decision).
    names : sequence of str, optional
    rng : None, int, SeedSequence or Generator, optional

    Returns
    -------
    InvalidAnswerGame

    References
    ----------
    A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods.
    """
    N, H, R, T, P, E, C, names = _checked(tables, invalid, cost, names, n_agents, memory, n_runs, max_interactions, stop)
    D, S, W = P.shape
    g = as_generator(rng)
    B = W * W
    offs = state_offsets(W, H)
    cum = np.cumsum(P, axis=2)
    cum[..., -1] = 1.0
    M = D * R
    grp = np.repeat(np.arange(D), R)
    ln = np.zeros((M, N), np.int64)   # memory length per agent
    val = np.zeros((M, N), np.int64)  # base-B code of the entries (oldest first)
    top = B ** (H - 1)
    full = offs[H] + np.array([(x * W + x) * sum(B**k for k in range(H)) for x in range(W)], np.int64)
    n_rounds = -(-T // N)
    succ = np.zeros((M, n_rounds))
    nval = np.zeros((M, n_rounds))
    live_r = np.zeros((M, n_rounds))
    ctime = np.full(M, np.nan)
    cname = np.full(M, -1, np.int64)
    stime = np.full(M, np.nan)
    streak = np.zeros(M, np.int64)
    last_ok = np.full(M, -1, np.int64)
    active = np.ones(M, bool)
    t_end = np.full(M, T, np.int64)
    winner = np.full(M, -1, np.int64)
    n_dec = np.zeros(M)
    n_valid = np.zeros(M)
    n_succ = np.zeros(M)
    csum = np.zeros(M)
    rows = np.arange(M)
    for t in range(T):
        if not active.any():
            break
        i = g.integers(N, size=M)
        j = g.integers(N - 1, size=M)
        j += j >= i
        si = offs[ln[rows, i]] + val[rows, i]
        sj = offs[ln[rows, j]] + val[rows, j]
        u = g.random((M, 4))
        vi = u[:, 0] >= E[grp, si]
        vj = u[:, 1] >= E[grp, sj]
        a = (u[:, 2:3] >= cum[grp, si]).sum(axis=1)
        b = (u[:, 3:4] >= cum[grp, sj]).sum(axis=1)
        both = vi & vj & active
        ok = both & (a == b)
        r = t // N
        act = active.astype(float)
        succ[:, r] += ok
        nval[:, r] += (vi.astype(float) + vj) * act
        live_r[:, r] += act
        n_dec += 2 * act
        n_valid += (vi.astype(float) + vj) * act
        n_succ += ok
        csum += (C[grp, si] + C[grp, sj]) * act
        last_ok = np.where(ok, a, last_ok)
        streak = np.where(ok, streak + 1, np.where(active, 0, streak))
        hit = (streak >= 3 * N) & np.isnan(stime)
        stime[hit] = t + 1
        # write the interaction into both memories where both sides were valid
        for who, own, par in ((i, a, b), (j, b, a)):
            idx = rows[both]
            w = who[both]
            L = ln[idx, w]
            v = val[idx, w]
            e = own[both] * W + par[both]
            v = np.where(L < H, v * B + e, (v % top) * B + e)
            ln[idx, w] = np.minimum(L + 1, H)
            val[idx, w] = v
        if 2 * (t + 1) >= H * N:  # consensus needs H entries per agent
            st = offs[ln] + val
            for x in range(W):
                done = (st == full[x]).all(axis=1) & np.isnan(ctime) & active
                ctime[done] = t + 1
                cname[done] = x
        end = np.zeros(M, bool)
        if stop == "streak":
            end = hit & active
            winner[end] = last_ok[end]
        elif stop == "consensus":
            end = (ctime == t + 1) & active
            winner[end] = cname[end]
        t_end[end] = t + 1
        active &= ~end
    width = np.maximum(live_r, 1e-300)
    with np.errstate(invalid="ignore", divide="ignore"):
        sr = np.where(live_r > 0, succ / width, np.nan)
        vr = np.where(live_r > 0, nval / (2 * width), np.nan)
    return InvalidAnswerGame(names=names, n_agents=N, memory=H, n_runs=R, max_interactions=T, stop=stop, group=grp,
                             success=sr, valid=vr, stop_time=t_end.astype(float), stopped=t_end < T, winner=winner,
                             consensus_time=ctime, consensus_name=cname, streak_time=stime, decisions=n_dec,
                             valid_decisions=n_valid, successes=n_succ, cost=csum)


def _checked(tables, invalid, cost, names, n_agents, memory, n_runs, max_interactions, stop):
    """The inputs of :func:`invalid_answer_game`, checked: ``(N, H, R, T, tables (D, S, W), invalid
    (D, S), cost (D, S), names)``."""
    N = check_int(n_agents, "n_agents", 2)
    H = check_int(memory, "memory", 1)
    R = check_int(n_runs, "n_runs", 1)
    T = check_int(max_interactions, "max_interactions", 1)
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {STOPS}; got {stop!r}")
    P = np.asarray(tables, dtype=float)
    if P.ndim == 2:
        P = P[None]
    if P.ndim != 3:
        raise ValueError(f"tables must have shape (D, S, W) or (S, W); got {np.shape(tables)}")
    D, S, W = P.shape
    E = _per_state(invalid, D, S, "invalid")
    C = _per_state(np.zeros((D, S)) if cost is None else cost, D, S, "cost")
    if S != n_states(W, H):
        raise ValueError(f"tables for W={W}, H={H} need {n_states(W, H)} states; got {S}")
    if not (np.isfinite(P).all() and (P >= 0).all() and np.allclose(P.sum(axis=2), 1.0, atol=1e-9)):
        raise ValueError("tables must hold probability vectors (rows >= 0 summing to 1)")
    if not ((E >= 0).all() and (E <= 1).all()):
        raise ValueError("invalid must hold probabilities in [0, 1]")
    if names is None:
        names = tuple(str(k) for k in range(W))
    names = tuple(names)
    if len(names) != W:
        raise ValueError(f"got {len(names)} names for tables with W = {W}")
    return N, H, R, T, P, E, C, names


def _per_state(x, D, S, what):
    a = np.asarray(x, dtype=float)
    if a.ndim == 1:
        a = a[None]
    if a.shape == (1, S) and D > 1:
        a = np.broadcast_to(a, (D, S))
    if a.shape != (D, S):
        raise ValueError(f"{what} must have shape ({D}, {S}) or ({S},) (one value per table and state); got {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} must be finite")
    return a
