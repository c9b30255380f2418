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

from .strategies import n_states, state_offsets

__all__ = ["InvalidAnswerGame", "invalid_answer_game"]


@dataclass(frozen=True)
class InvalidAnswerGame:
    """Runs of the memory game with invalid answers (``D`` tables x ``n_runs`` runs each).

    Attributes
    ----------
    names : tuple of str
    n_agents, memory, n_runs, max_interactions : int
    group : numpy.ndarray, shape (D * n_runs,)
        Table (draw) index of each run.
    success : numpy.ndarray, shape (D * n_runs, n_rounds)
        Success rate per population round (``N`` interactions).
    valid : numpy.ndarray, shape (D * n_runs, n_rounds)
        Share of valid decisions per round.
    consensus_time : numpy.ndarray, shape (D * n_runs,)
        First interaction count (from 1) at which every memory holds ``H`` successful plays of
        one name (the runners' ``stop="consensus"``); NaN if never within the cap.
    consensus_name : numpy.ndarray, shape (D * n_runs,)
        Index of that name (-1: none).
    streak_time : numpy.ndarray, shape (D * n_runs,)
        Interactions until ``3N`` consecutive successes were first completed (the published
        stop rule); NaN if never.

    References
    ----------
    A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods.
    """

    names: tuple
    n_agents: int
    memory: int
    n_runs: int
    max_interactions: int
    group: np.ndarray
    success: np.ndarray
    valid: np.ndarray
    consensus_time: np.ndarray
    consensus_name: np.ndarray
    streak_time: np.ndarray

    def __repr__(self) -> str:
        return (f"InvalidAnswerGame(N={self.n_agents}, H={self.memory}, {len(self.group)} runs, "
                f"memory consensus in {np.mean(~np.isnan(self.consensus_time)):.0%})")

    def to_frame(self):
        """One row per run: ``run``, ``group``, ``consensus_time`` (interactions),
        ``consensus_rounds``, ``consensus_name`` (``"none"`` if never), ``streak_rounds``."""
        import pandas as pd

        lab = np.array(list(self.names) + ["none"], dtype=object)
        return pd.DataFrame({
            "run": np.arange(len(self.group)), "group": self.group, "consensus_time": self.consensus_time,
            "consensus_rounds": self.consensus_time / self.n_agents, "consensus_name": lab[self.consensus_name],
            "streak_rounds": self.streak_time / self.n_agents,
        })

    def per_group(self):
        """Per table (draw): ``group``, ``name`` (each name and ``"none"``), ``runs`` won
        (memory consensus), ``n_runs``, and the mean ``consensus_rounds`` of the runs that got
        there (NaN if none did)."""
        import pandas as pd

        f = self.to_frame()
        rows = []
        for g, sub in f.groupby("group"):
            cr = sub["consensus_rounds"].mean()
            for nm in list(self.names) + ["none"]:
                rows.append({"group": int(g), "name": nm, "runs": int((sub["consensus_name"] == nm).sum()),
                             "n_runs": len(sub), "consensus_rounds": cr})
        return pd.DataFrame(rows)


def invalid_answer_game(tables, invalid, *, n_agents: int, memory: int, n_runs: int, max_interactions: int,
                        names=None, rng=None) -> InvalidAnswerGame:
    """Play the memory game with state-dependent invalid answers, from empty memories.

    Each interaction picks an ordered pair of distinct agents uniformly; each side is invalid
    with probability ``invalid[d, s]`` (``s`` its memory state), else draws a name from
    ``tables[d, s]``. Both valid and equal: a success, written into both memories. Otherwise a
    failure; it is written into the memories only when both sides are valid. Every run goes to
    ``max_interactions``; consensus and streak times are recorded on the way.

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
    names : sequence of str, optional
    rng : None, int, SeedSequence or Generator, optional

    Returns
    -------
    InvalidAnswerGame

    References
    ----------
    A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods.
    """
    from normlab._validate import check_int

    N = check_int(n_agents, "n_agents", 2)
    H = check_int(memory, "memory", 1)
    R = check_int(n_runs, "n_runs", 1)
    T = check_int(max_interactions, "max_interactions", 1)
    P = np.asarray(tables, dtype=float)
    if P.ndim == 2:
        P = P[None]
    E = np.asarray(invalid, dtype=float)
    if E.ndim == 1:
        E = E[None]
    if P.ndim != 3:
        raise ValueError(f"tables must have shape (D, S, W) or (S, W); got {np.shape(tables)}")
    D, S, W = P.shape
    if S != n_states(W, H):
        raise ValueError(f"tables for W={W}, H={H} need {n_states(W, H)} states; got {S}")
    if E.shape != (D, S):
        raise ValueError(f"invalid must have shape ({D}, {S}) (one probability per table and state); got {E.shape}")
    if not (np.isfinite(P).all() and (P >= 0).all() and np.allclose(P.sum(axis=2), 1.0, atol=1e-9)):
        raise ValueError("tables must hold probability vectors (rows >= 0 summing to 1)")
    if not (np.isfinite(E).all() and (E >= 0).all() and (E <= 1).all()):
        raise ValueError("invalid must hold probabilities in [0, 1]")
    if names is None:
        names = tuple(str(k) for k in range(W))
    names = tuple(names)
    if len(names) != W:
        raise ValueError(f"got {len(names)} names for tables with W = {W}")
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
    ctime = np.full(M, np.nan)
    cname = np.full(M, -1, np.int64)
    stime = np.full(M, np.nan)
    streak = np.zeros(M, np.int64)
    rows = np.arange(M)
    for t in range(T):
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
        both = vi & vj
        ok = both & (a == b)
        r = t // N
        succ[:, r] += ok
        nval[:, r] += vi.astype(np.int64) + vj
        streak = np.where(ok, streak + 1, 0)
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
        if t + 1 >= H * N // 2:  # consensus needs at least H entries per agent
            st = offs[ln] + val
            for x in range(W):
                done = (st == full[x]).all(axis=1) & np.isnan(ctime)
                ctime[done] = t + 1
                cname[done] = x
    last = T - (n_rounds - 1) * N
    width = np.full(n_rounds, float(N))
    width[-1] = last
    return InvalidAnswerGame(names=names, n_agents=N, memory=H, n_runs=R, max_interactions=T, group=grp,
                             success=succ / width, valid=nval / (2 * width), consensus_time=ctime,
                             consensus_name=cname, streak_time=stime)
