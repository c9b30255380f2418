"""Mean field of the memory-H strategy-table game: the population as N -> infinity.

In the game of :func:`normlab.theory.strategy_game` on a complete graph, an interaction pairs two
agents; each picks a name by its strategy ``p(name | own memory state)`` and records
``(own name, partner's name)``. As ``N -> infinity`` two partners' memories become independent,
so the state of the population is the distribution ``x`` of memory states (one entry per state
of :mod:`normlab.theory.strategies`, 1 365 for ``W = 2``, ``H = 5``) and the partner's name is a
draw from the population's production distribution ``q(x) = x P`` (``P`` the strategy table).
One update of an agent in state ``s`` moves it to ``push(s, (a, b))`` with probability
``p(a | s) q_b``:

``F(x)_j = sum_s x_s sum_{a, b} p(a | s) q_b(x) [push(s, (a, b)) = j]``.

Every agent takes part in two interactions per population round on average, so in rounds
``dx/dt = 2 (F(x) - x)``. :func:`strategy_mean_field` iterates the relaxed map
``x <- (1 - h) x + h F(x)`` with ``h = 2 / steps_per_round`` (``steps_per_round = 2`` is the
synchronous map ``x <- F(x)``; larger values follow the continuous-time limit of the sequential
game; the fixed points are the same) from an initial distribution -- by default the empty memory
of the convergence runs -- until ``|F(x) - x|_1 < tol``, and classifies the fixed point reached:

- its production shares ``q*``: the name holding the majority is the convention the population
  settles on (``outcome``);
- its success probability ``S* = sum_b q*_b ** 2``: Flint Ashery et al. (2025, Methods) count a population as
  converged when 95 % of its last ``3N`` interactions succeed, a window whose success fraction
  tends to ``S*`` as ``N`` grows, so the limit meets that rule only when ``S* >= 0.95``
  (``consensus``). A table that keeps some noise in settled memories can settle on a name (a
  majority) yet miss the rule at large ``N``;
- its stability in continuous time: the leading real part of the eigenvalues of the Jacobian of
  ``F`` on the simplex's tangent space (attracting when below 1).

The limit of P(a population settles on each name) as ``N`` grows follows: a stable fixed point
reached from the initial state gives probability 1 to its majority name (interaction
*amplifies* any asymmetry into a certain outcome, *creates* one where the first move is
unbiased, or *overrides* the first move's bias); the symmetric fixed point of a
relabelling-symmetric table, when unstable, gives ``1 / W`` to each name (finite-size noise
breaks the symmetry, evenly); a stable fixed point with equal shares gives no convention. For a
relabelling-symmetric table (``W = 2``) the iterate is kept exactly symmetric, so rounding errors
cannot break the symmetry.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective bias
in LLM populations", Sci. Adv. 11, eadu9368 (2025): Experimental Setup, Methods (convergence:
95 % of the last 3N interactions successful), Fig. 2; A. Flint Ashery, L. M. Aiello,
R. Pastor-Satorras, A. Baronchelli, "Collective bias in LLM populations as a function of group
size", arXiv:2510.22422 (interaction amplifies, creates or overrides individual bias);
D. Centola, J. Becker, D. Brackbill, A. Baronchelli, Science 360, 1116 (2018) (memory-M best
response, a relabelling-symmetric table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from normlab._display import legend_outside, plotting
from normlab._validate import check_int

from .strategies import Strategy, StrategyTable, encode_state, n_states, resolve_strategy, state_offsets

__all__ = ["StrategyMeanField", "strategy_mean_field", "mean_field_boundary", "successor_states"]

#: Success rate at which Flint Ashery et al. (2025) counts a population as converged (Methods).
CONSENSUS_SUCCESS = 0.95
_DENSE_LIMIT = 200  # states up to which the Jacobian's spectrum is computed densely (ARPACK above)


# ----------------------------------------------------------------------------- state algebra
@lru_cache(maxsize=16)
def _successors(W: int, H: int) -> np.ndarray:
    S = n_states(W, H)
    B = W * W
    offs = state_offsets(W, H)
    s = np.arange(S, dtype=np.int64)
    k = np.searchsorted(offs, s, side="right") - 1  # memory length of each state
    v = s - offs[k]
    e = np.arange(B, dtype=np.int64)  # entry code own * W + partner
    full = k == H
    top = B ** (H - 1)
    v_next = np.where(full[:, None], (v % top)[:, None] * B + e[None, :], v[:, None] * B + e[None, :])
    k_next = np.where(full, H, k + 1)
    out = (offs[k_next][:, None] + v_next).reshape(S, W, W)
    out.setflags(write=False)
    return out


def successor_states(n_names: int, memory: int) -> np.ndarray:
    """Memory state after recording ``(own a, partner b)`` in each state.

    Parameters
    ----------
    n_names, memory : int
        Pool size ``W`` and memory length ``H``.

    Returns
    -------
    numpy.ndarray of int64, shape (n_states(W, H), W, W)
        ``succ[s, a, b]``: the state index (encoding of :mod:`normlab.theory.strategies`) of memory
        ``s`` with ``(a, b)`` appended (the oldest entry dropped when ``s`` holds ``H`` entries).
        Read-only.
    """
    W = check_int(n_names, "n_names", low=2)
    H = check_int(memory, "memory", low=1)
    if n_states(W, H) > 20_000_000:
        raise ValueError(f"W={W}, H={H} has {n_states(W, H):,} memory states: too many for the mean field (limit 2e7)")
    return _successors(W, H)


@lru_cache(maxsize=16)
def _swap_states(H: int) -> np.ndarray:
    """For W = 2: index of each state after swapping the two names."""
    succ = _successors(2, H)
    out = np.zeros(succ.shape[0], np.int64)
    # every memory of k + 1 entries is one of k entries with one entry appended: walk the lengths,
    # building each state and its image side by side (the empty memory maps to itself)
    frontier = [(0, 0)]
    for _ in range(H):
        nxt = []
        for s, t in frontier:
            for a in range(2):
                for b in range(2):
                    nxt.append((int(succ[s, a, b]), int(succ[t, 1 - a, 1 - b])))
        for s, t in nxt:
            out[s] = t
        frontier = nxt
    out.setflags(write=False)
    return out


def _full_state(W: int, H: int, name: int) -> int:
    return encode_state([(name, name)] * H, W)


# ----------------------------------------------------------------------------- the map
def _apply(x: np.ndarray, P: np.ndarray, succ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``F(x)`` and the production distribution ``q(x)``."""
    q = x @ P
    w = x[:, None, None] * P[:, :, None] * q[None, None, :]
    return np.bincount(succ.reshape(-1), weights=w.reshape(-1), minlength=x.size), q


def _jacobian_spectrum(x: np.ndarray, P: np.ndarray, succ: np.ndarray) -> float:
    """Largest real part of the eigenvalues of ``dF/dx`` on the tangent space of the simplex.

    ``dF_j/dx_r = M(q)[r, j] + sum_b G[j, b] P[r, b]`` with ``M(q)[r, j] = sum_{a,b} p(a|r) q_b
    [push(r,(a,b)) = j]`` and ``G[j, b] = sum_s x_s sum_a p(a|s) [push(s,(a,b)) = j]``. Since
    ``1' J = 2 * 1'`` the tangent space ``{v : sum v = 0}`` is invariant; ``K = J (I - w 1')``
    (``1' w = 1``) has the tangent spectrum plus one zero.
    """
    S, W = P.shape
    q = x @ P
    rows = np.repeat(np.arange(S), W * W)
    cols = succ.reshape(-1)
    mvals = (P[:, :, None] * q[None, None, :]).reshape(-1)
    gw = np.broadcast_to(x[:, None, None] * P[:, :, None], (S, W, W)).reshape(-1)  # x_s p(a|s) at (s, a, b)
    bidx = np.tile(np.arange(W), S * W)
    G = np.zeros((S, W))
    np.add.at(G, (cols, bidx), gw)
    w = np.full(S, 1.0 / S)
    if S <= _DENSE_LIMIT:
        J = np.zeros((S, S))
        np.add.at(J, (cols, rows), mvals)
        J += G @ P.T
        K = J - np.outer(J @ w, np.ones(S))
        return float(np.max(np.linalg.eigvals(K).real))
    import scipy.sparse as sp
    from scipy.sparse.linalg import LinearOperator, eigs

    Mt = sp.csr_matrix((mvals, (cols, rows)), shape=(S, S))

    def mv(v):
        v = np.asarray(v).reshape(-1)
        u = v - w * v.sum()
        return Mt @ u + G @ (P.T @ u)

    from scipy.sparse.linalg import ArpackNoConvergence

    try:
        vals = eigs(LinearOperator((S, S), matvec=mv, dtype=float), k=6, which="LR", return_eigenvectors=False,
                    maxiter=20 * S, tol=1e-8)
    except ArpackNoConvergence:  # rare: fall back to the dense spectrum (seconds for a few thousand states)
        J = (Mt + sp.csr_matrix(G @ P.T)).toarray()
        vals = np.linalg.eigvals(J - np.outer(J @ w, np.ones(S)))
    return float(np.max(vals.real))


# ----------------------------------------------------------------------------- result type
@dataclass(frozen=True)
class StrategyMeanField:
    """Mean-field trajectory of a strategy table from one initial distribution of memory states.

    Attributes
    ----------
    names : tuple of str
    memory : int
    t : numpy.ndarray
        Time in population rounds (``N`` interactions) of each recorded step.
    share : numpy.ndarray, shape (len(t), W)
        Production distribution ``q(x(t))``: the expected share of each name among the names
        produced at time ``t`` (what a population round's production counts estimate).
    success : numpy.ndarray
        ``sum_b q_b ** 2``: probability that an interaction succeeds.
    x : numpy.ndarray
        Final distribution of memory states.
    converged : bool
        Whether ``|F(x) - x|_1 < tol`` was reached within ``max_rounds``.
    residual : float
        Final ``|F(x) - x|_1``.
    leading_eigenvalue : float
        Largest real part of the eigenvalues of the Jacobian of ``F`` on the tangent space at the
        final point (NaN if not computed); the fixed point attracts in continuous time when it is
        below 1.
    outcome : str
        The name holding the majority at a stable fixed point; ``"none"`` at a stable fixed point
        with equal shares; ``"split"`` at the unstable symmetric fixed point of a
        relabelling-symmetric table (finite-size noise decides, evenly); ``"undetermined"`` at an
        unstable fixed point of an asymmetric table (the initial state lies on a separatrix), or
        when neither convergence nor stability was established.
    consensus : bool
        Whether the final success probability meets ``consensus_level`` (the convergence rule of Flint Ashery et al. 2025;
        rule in the limit).
    p_majority : dict
        Limit ``N -> infinity`` of P(the population settles on each name), and ``"none"``; NaN
        values when undetermined.
    p_consensus : dict
        Limit of P(consensus on each name) by the 95 % rule: ``p_majority`` where ``consensus``
        holds, else everything on ``"none"``.
    rounds_to_95 : float
        First time (rounds) at which the success probability, averaged over the trailing three
        rounds (the 3N-interaction window of the convergence rule of Flint Ashery et al. 2025), reaches 0.95; NaN if never.
    symmetric : bool
        Whether the table is invariant under swapping the two names (iterate kept symmetric).
    settings : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods; Flint Ashery,
    Aiello, Pastor-Satorras & Baronchelli, arXiv:2510.22422.
    """

    names: tuple
    memory: int
    t: np.ndarray
    share: np.ndarray
    success: np.ndarray
    x: np.ndarray
    converged: bool
    residual: float
    leading_eigenvalue: float
    outcome: str
    consensus: bool
    p_majority: dict
    p_consensus: dict
    rounds_to_95: float
    symmetric: bool
    settings: dict = field(default_factory=dict)

    @property
    def final_share(self) -> dict:
        """Production share of each name at the final point."""
        return {nm: float(v) for nm, v in zip(self.names, self.share[-1])}

    @property
    def stable(self) -> bool | None:
        """Whether the final point attracts (None when the spectrum was not computed)."""
        return None if np.isnan(self.leading_eigenvalue) else bool(self.leading_eigenvalue < 1.0 - 1e-9)

    def to_frame(self):
        """Long format: ``t``, ``quantity`` (``"share"`` or ``"success"``), ``name`` (empty for
        success), ``value``."""
        import pandas as pd

        T, W = self.share.shape
        a = pd.DataFrame({"t": np.repeat(self.t, W), "quantity": "share",
                          "name": np.tile(np.asarray(self.names, dtype=object), T), "value": self.share.reshape(-1)})
        b = pd.DataFrame({"t": self.t, "quantity": "success", "name": "", "value": self.success})
        return pd.concat([a, b], ignore_index=True)

    def summary(self) -> dict:
        """JSON-friendly summary of the fixed point reached."""
        def fin(v):
            return None if v is None or (isinstance(v, float) and not np.isfinite(v)) else v

        return {"outcome": self.outcome, "consensus": self.consensus,
                "p_majority": {k: fin(float(v)) for k, v in self.p_majority.items()},
                "p_consensus": {k: fin(float(v)) for k, v in self.p_consensus.items()},
                "final_share": self.final_share, "final_success": float(self.success[-1]),
                "converged": self.converged, "rounds": float(self.t[-1]), "residual": self.residual,
                "leading_eigenvalue": fin(self.leading_eigenvalue), "stable": self.stable,
                "rounds_to_95": fin(self.rounds_to_95), "symmetric": self.symmetric}

    @plotting
    def plot(self, ax=None, *, success: bool = True):
        """Production share of each name (and the success probability) against rounds."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(5.2, 3.4))
        for k, nm in enumerate(self.names):
            ax.plot(self.t, self.share[:, k], label=f"share of {nm}")
        if success:
            ax.plot(self.t, self.success, "k--", lw=1, label="P(success)")
            ax.axhline(CONSENSUS_SUCCESS, color="0.5", ls=":", lw=1, label="convergence rule (95 %)")
        what = f"settles on {self.outcome}" if self.outcome in self.names else self.outcome
        ax.set(xlabel="population rounds", ylabel="mean field", ylim=(-0.02, 1.02),
               title=f"mean field (N → ∞), H = {self.memory}: {what}")
        ax.xaxis.get_major_locator().set_params(integer=True)  # the map advances by whole rounds
        legend_outside(ax, "right")
        return ax

    def __repr__(self) -> str:
        sh = ", ".join(f"{k}={v:.3f}" for k, v in self.final_share.items())
        ev = "" if np.isnan(self.leading_eigenvalue) else f", leading eigenvalue {self.leading_eigenvalue:.4f}"
        return (f"StrategyMeanField(H={self.memory}, outcome={self.outcome!r}, share {sh}, "
                f"success {self.success[-1]:.4f} ({'meets' if self.consensus else 'misses'} the 95% rule), "
                f"{'converged' if self.converged else 'not converged'} at "
                f"t={self.t[-1]:.1f} rounds{ev})")

    def _repr_html_(self) -> str:
        import html

        return f"<p><code>{html.escape(repr(self))}</code></p>"

    @classmethod
    def _contract_example(cls) -> "StrategyMeanField":
        """Four rounds of a two-name, memory-one mean field settling on ``A``, literal numbers
        (``tests/umbrella/test_contracts.py``)."""
        share = np.array([[0.5, 0.5], [0.7, 0.3], [0.9, 0.1], [0.99, 0.01]])
        return cls(names=("A", "B"), memory=1, t=np.arange(4.0), share=share, success=(share ** 2).sum(axis=1),
                   x=np.array([0.0, 0.98, 0.01, 0.01, 0.0]), converged=True, residual=1e-9, leading_eigenvalue=0.5,
                   outcome="A", consensus=True, p_majority={"A": 1.0, "B": 0.0, "none": 0.0},
                   p_consensus={"A": 1.0, "B": 0.0, "none": 0.0}, rounds_to_95=3.0, symmetric=False)


# ----------------------------------------------------------------------------- entry points
def _as_table(strategy, memory):
    if isinstance(strategy, StrategyTable):
        if memory is not None and int(memory) != strategy.memory:
            raise ValueError(f"the strategy table is for memory H={strategy.memory}; got memory={memory}")
        return strategy
    if isinstance(strategy, (str, Strategy)):
        if memory is None:
            raise ValueError("memory is required unless the strategy is a StrategyTable")
        s = resolve_strategy(strategy, None)
        return s.to_table(check_int(memory, "memory", low=1), names=getattr(s, "names", None) or None)
    hint = " (for a fitted table pass fit.mean_table())" if hasattr(strategy, "mean_table") else ""
    raise TypeError(f"strategy must be a StrategyTable, a Strategy or a built-in name; got {type(strategy).__name__}"
                    + hint)


def _initial(initial, table) -> np.ndarray:
    W, H, names = table.n_names, table.memory, table.names
    S = table.table.shape[0]
    x = np.zeros(S)
    if initial is None or (isinstance(initial, str) and initial == "empty"):
        x[0] = 1.0
        return x
    if isinstance(initial, str):
        nm = initial.split(":", 1)[1] if initial.startswith("consensus:") else initial
        if nm not in names:
            raise ValueError(f"initial must be 'empty', 'consensus:<name>', a name of {names}, W shares or "
                             f"{S} state probabilities; got {initial!r}")
        x[_full_state(W, H, names.index(nm))] = 1.0
        return x
    a = np.asarray(initial, dtype=float).reshape(-1)
    if a.size not in (W, S) or not np.all(np.isfinite(a)) or a.min() < 0 or abs(a.sum() - 1.0) > 1e-9:
        raise ValueError(f"initial as an array must be {W} fractions (agents holding a full memory of each "
                         f"name) or {S} state probabilities, non-negative and summing to 1")
    if a.size == S:
        return a.copy()
    for k in range(W):
        x[_full_state(W, H, k)] += a[k]
    return x


def strategy_mean_field(strategy, *, memory: int | None = None, initial=None, max_rounds: float = 500.0,
                        steps_per_round: int = 20, tol: float = 1e-9, stability: bool = True,
                        consensus_level: float = CONSENSUS_SUCCESS, record_every: int = 1) -> StrategyMeanField:
    """Iterate the mean-field map of the strategy game from an initial distribution of memories.

    Parameters
    ----------
    strategy : StrategyTable, Strategy or str
        A table (its memory is used) or any strategy tabulated at ``memory``.
    memory : int, optional
        Memory length ``H`` (required unless ``strategy`` is a table).
    initial : None, str or array_like, optional
        ``None``/``"empty"`` (the empty memory of the convergence runs of Flint Ashery et al. 2025);
        ``"consensus:<name>"`` or a name (every agent holds ``H`` successful plays of it);
        ``W`` fractions (agents holding a full memory of each name: a mixture, as in the
        basin-width runs of :func:`normlab.calibration.predict`); or a probability vector over
        the memory states.
    max_rounds : float, optional
        Stop after this many population rounds if not converged.
    steps_per_round : int, optional
        Steps of the relaxed map per population round (``h = 2 / steps_per_round``; 2 gives the
        synchronous map ``x <- F(x)``). Fixed points do not depend on it.
    tol : float, optional
        Convergence: ``|F(x) - x|_1 < tol``.
    stability : bool, optional
        Compute the Jacobian spectrum at the final point (dense for up to 200 states, else the
        six eigenvalues of largest real part by ARPACK). A stable final point is classified
        even when ``tol`` was not reached within ``max_rounds`` (slow directions); ``converged``
        says whether it was.
    consensus_level : float, optional
        Success probability from which a stable fixed point counts as a consensus (0.95, Flint Ashery et al.
        2025, Methods).
    record_every : int, optional
        Keep every ``record_every``-th step of the trajectory (the final step is always kept).

    Returns
    -------
    StrategyMeanField

    Raises
    ------
    ValueError, TypeError
        Bad strategy, memory, initial state or settings (checked before iterating).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods (convergence
    rule) and Fig. 2; Flint Ashery, Aiello, Pastor-Satorras & Baronchelli, arXiv:2510.22422.

    Examples
    --------
    >>> from normlab.theory.memory_mean_field import strategy_mean_field
    >>> strategy_mean_field("best_response", memory=3).outcome   # symmetric: noise decides
    'split'
    """
    table = _as_table(strategy, memory)
    spr = check_int(steps_per_round, "steps_per_round", low=2)
    every = check_int(record_every, "record_every", low=1)
    if not float(max_rounds) > 0:
        raise ValueError(f"max_rounds must be > 0; got {max_rounds!r}")
    if not float(tol) > 0:
        raise ValueError(f"tol must be > 0; got {tol!r}")
    if not 0 < float(consensus_level) <= 1:
        raise ValueError(f"consensus_level must be in (0, 1]; got {consensus_level!r}")
    x = _initial(initial, table)
    W, H = table.n_names, table.memory
    P = np.ascontiguousarray(table.table)
    succ = _successors(W, H)
    swap = None
    symmetric = False
    if W == 2:
        sw = _swap_states(H)
        symmetric = bool(np.allclose(P[sw][:, ::-1], P, rtol=0, atol=1e-12))
        if symmetric and np.allclose(x[sw], x, rtol=0, atol=1e-15):
            swap = sw  # keep the iterate exactly symmetric
    h = 2.0 / spr
    n_steps = int(np.ceil(float(max_rounds) * spr))
    ts, shares, succs = [], [], []
    converged = False
    res = float("nan")
    for n in range(n_steps + 1):
        fx, q = _apply(x, P, succ)
        res = float(np.abs(fx - x).sum())
        done = res < tol
        if n % every == 0 or done or n == n_steps:
            ts.append(n / spr)
            shares.append(q)
            succs.append(float(q @ q))
        if done:
            converged = True
            break
        if n == n_steps:
            break
        x = (1.0 - h) * x + h * fx
        if swap is not None:
            x = 0.5 * (x + x[swap])
        x /= x.sum()  # off the simplex F is quadratic: rounding in the total mass would grow
    t = np.asarray(ts)
    share = np.vstack(shares)
    success = np.asarray(succs)
    lead = _jacobian_spectrum(x, P, succ) if stability else float("nan")
    q = share[-1]
    S_fin = float(success[-1])
    names = tuple(table.names)
    stable = (not np.isnan(lead)) and lead < 1.0 - 1e-9
    if stability and not stable:
        outcome = "split" if (converged and swap is not None) else "undetermined"
    elif not stability and not converged:
        outcome = "undetermined"
    elif np.max(q) - np.min(q) < 1e-9:
        outcome = "none"
    else:
        outcome = names[int(np.argmax(q))]
    consensus = bool(S_fin >= consensus_level - 1e-12)
    pm = {nm: 0.0 for nm in names} | {"none": 0.0}
    if outcome in names:
        pm[outcome] = 1.0
    elif outcome == "none":
        pm["none"] = 1.0
    elif outcome == "split":
        pm = {nm: 1.0 / W for nm in names} | {"none": 0.0}
    else:
        pm = {k: float("nan") for k in pm}
    pc = dict(pm) if (consensus or outcome == "undetermined") else {nm: 0.0 for nm in names} | {"none": 1.0}
    # rounds to 95 %: trailing 3-round mean of the success probability (exact on the recorded grid)
    r95 = float("nan")
    if success.size:
        dt = every / spr
        k3 = max(1, int(round(3.0 / dt)))
        c = np.concatenate([[0.0], np.cumsum(success)])
        idx = np.arange(success.size)
        lo = np.maximum(0, idx + 1 - k3)
        trail = (c[idx + 1] - c[lo]) / (idx + 1 - lo)
        ok = np.flatnonzero((trail >= CONSENSUS_SUCCESS - 1e-12) & (t >= 3.0 - 1e-12))
        r95 = float(t[ok[0]]) if ok.size else float("nan")
    settings = dict(initial=initial if isinstance(initial, (str, type(None))) else "array", max_rounds=float(max_rounds),
                    steps_per_round=spr, tol=float(tol), consensus_level=float(consensus_level),
                    record_every=every)
    return StrategyMeanField(names=tuple(names), memory=H, t=t, share=share, success=success, x=x,
                             converged=converged, residual=res, leading_eigenvalue=lead, outcome=outcome,
                             consensus=consensus, p_majority=pm, p_consensus=pc, rounds_to_95=r95,
                             symmetric=symmetric, settings=settings)


def mean_field_boundary(strategy, *, memory: int | None = None, majority=None, tol: float = 1e-4,
                        **kwargs) -> float:
    """Mixture at which the mean-field outcome switches between two names' consensus.

    The population starts with a fraction ``f`` of agents holding ``H`` successful plays of
    ``majority`` and the rest of the other name (``W = 2``); the boundary ``f*`` is where the
    fixed point reached switches from the other name to ``majority`` (bisection). ``1 - f*`` is
    the mean-field counterpart of the basin ``width`` of :func:`normlab.calibration.predict`
    (Flint Ashery et al. 2025, Supplementary Text "Characterizing Relative Strength", Fig. S9).

    Parameters
    ----------
    strategy : StrategyTable, Strategy or str
    memory : int, optional
    majority : str, optional
        Default: the first name.
    tol : float, optional
        Width of the final bracket.
    **kwargs
        Passed to :func:`strategy_mean_field` (``stability`` is switched off: outcomes are read
        from the name holding the majority at the fixed point).

    Returns
    -------
    float
        ``f*`` in [0, 1]: 0 if ``majority`` wins from every mixture, 1 if it never does.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. S9.
    """
    table = _as_table(strategy, memory)
    if table.n_names != 2:
        raise ValueError("mean_field_boundary needs a two-name pool")
    names = table.names
    x_name = names[0] if majority is None else majority
    if x_name not in names:
        raise ValueError(f"majority {majority!r} is not a name of {names}")
    xi = names.index(x_name)
    if not 0 < float(tol) < 0.5:
        raise ValueError(f"tol must be in (0, 0.5); got {tol!r}")
    kw = dict(kwargs, stability=False)

    def wins(f):
        init = np.zeros(2)
        init[xi], init[1 - xi] = f, 1.0 - f
        mf = strategy_mean_field(table, initial=init, **kw)
        return mf.share[-1, xi] > 0.5

    if wins(0.0):
        return 0.0
    if not wins(1.0):
        return 1.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if wins(mid):
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)
