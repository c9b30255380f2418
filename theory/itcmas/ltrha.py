"""The LTRHA resource loop around the ITCMA-S equations: the matrix (ranker) protocol, closed-form
rankers, the simulation and its result.

:func:`simulate_ltrha` is normlab's own minimal closed-form world around Eqs. 10-19 (the
paper's world is an LLM sandbox); its extra rules are stated in its docstring. The matrix is
pluggable through the :class:`Ranker` protocol; the LLM matrix (prompt and ranker) lives in
:mod:`normlab.llm_runs.rankers`.

References
----------
X. Zhang, X. Yin, N. Jiang, S. Su (Zhang et al.), "Can Agents Spontaneously Form a Society?
Introducing a Novel Architecture for Generative Multi-Agents to Elicit Social Emergence"
(ITCMA-S), arXiv:2409.06750 (2024): Sect. 4 (LTRHA, Eqs. 17-19), Figs. 6-7.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from normlab._display import html_card, legend_outside, new_axes, plain, plotting, short_repr
from normlab._rng import as_generator, as_seed_sequence, spawn
from normlab._validate import Check, Relation, validated

from ._checks import _int, _real, _scalar, _sigmoid
from .allocation import _allocation_table, _changes, _check_ranks, _min_ranks, gini
from .equations import _recency_weights, _topic_by_env, _weights


# ================================================================== LTRHA: the matrix (ranker) protocol
def _frozen(a):
    """A read-only view (the simulation never writes to these arrays after creating them)."""
    v = np.asarray(a).view()
    v.setflags(write=False)
    return v


@dataclass(frozen=True)
class MatrixInput:
    """What the LTRHA matrix sees after one step: ``matrix(a_i, S, tpc_env)``.

    Arrays are read-only copies (a ranker cannot change the simulation). The paper's matrix sees
    the agents' actions, the resource structure and the topics; the emotions are included for
    closed-form rankers that want them.

    Attributes
    ----------
    step : int
        Time step (from 1).
    agents : tuple of str
        Agent names, index ``i`` = agent ``i``.
    env_names : tuple of str
        Sub-environment (locale) names.
    env : numpy.ndarray of int64
        Locale of each agent this step, shape ``(n,)``.
    acted : numpy.ndarray of bool
        Whether each agent acted this step (probability by Eq. 18).
    valence : numpy.ndarray of float64
        Effect of each agent's action on the atmosphere of its locale (NaN if it did not act).
    resources : numpy.ndarray of float64
        ``S_i`` before this step's reallocation.
    topic : numpy.ndarray of float64
        ``tpc_env`` of each locale this step (Eq. 17), shape ``(n_envs,)``; NaN if empty.
    pleasure, arousal, dominance, driver : numpy.ndarray of float64
        ``P, A, D`` (Eqs. 10-12) and ``d`` (Eq. 15) of each agent this step.

    References
    ----------
    Input of the matrix in Sect. 4.2.2 of Zhang et al., ITCMA-S, arXiv:2409.06750.
    """

    step: int
    agents: tuple
    env_names: tuple
    env: np.ndarray
    acted: np.ndarray
    valence: np.ndarray
    resources: np.ndarray
    topic: np.ndarray
    pleasure: np.ndarray
    arousal: np.ndarray
    dominance: np.ndarray
    driver: np.ndarray

    @property
    def n_agents(self) -> int:
        return len(self.agents)

    @property
    def contribution(self) -> np.ndarray:
        """Each agent's push on its locale's topic this step: its action's valence, 0 if idle."""
        return np.where(self.acted, self.valence, 0.0)


@runtime_checkable
class Ranker(Protocol):
    """The LTRHA matrix: rank all agents after a step.

    Any callable ``ranker(obs, *, rng)`` qualifies. It receives a :class:`MatrixInput` and the
    run's :class:`numpy.random.Generator` (its only source of randomness, so that a seeded run is
    reproducible) and returns one number per agent, **lower = better** (rank 1 is the best).
    Only the order and ties matter: tied agents share the Eq. 19 amounts of the positions they
    occupy (:func:`resource_changes`), so ties are resolved deterministically. Convert an ordered
    list of names (e.g. from an LLM) with :func:`ranks_from_order`.

    References
    ----------
    The matrix of Sect. 4.2.2 of Zhang et al., ITCMA-S, arXiv:2409.06750 ("We use an LLM as the
    matrix model and have it rank each agent").
    """

    def __call__(self, obs: MatrixInput, *, rng: np.random.Generator) -> np.ndarray: ...


@dataclass(frozen=True)
class ContributionRanker:
    """Closed-form matrix: rank by contribution to the locale's topic, plus Gaussian noise.

    Score ``c_i + noise * eps_i``, where ``c_i`` is the valence of agent ``i``'s action (0 if it
    did not act) and ``eps_i ~ N(0, 1)``; the highest score gets rank 1. The noise is drawn even
    when ``noise = 0`` so runs with different noise share their random streams. With
    ``noise = 0``, idle agents tie (and share their positions' amounts).

    Parameters
    ----------
    noise : float, optional
        Standard deviation of the ranking noise (>= 0), standing in for the LLM matrix's
        judgement noise.

    References
    ----------
    Closed-form stand-in for the LLM matrix of Sect. 4.2.2 of Zhang et al., ITCMA-S,
    arXiv:2409.06750, which ranks agents by their goals and the topic ``tpc_env`` (Eq. 17); the
    ranking feeds Eq. 19.
    """

    noise: float = 0.1

    def __post_init__(self):
        _scalar(self.noise, "noise", low=0.0)

    def __call__(self, obs: MatrixInput, *, rng: np.random.Generator) -> np.ndarray:
        eps = rng.standard_normal(obs.n_agents)
        return _min_ranks(-(obs.contribution + self.noise * eps))


@dataclass(frozen=True)
class ResourceRanker:
    """Closed-form matrix: rank by current resources plus Gaussian noise (rich get richer).

    A null model of pure cumulative advantage: ranking ignores what agents did.

    Parameters
    ----------
    noise : float, optional
        Standard deviation of the ranking noise (>= 0).

    References
    ----------
    Baseline for the matrix of Sect. 4.2.2 of Zhang et al., ITCMA-S, arXiv:2409.06750 (ranking
    fed to Eq. 19).
    """

    noise: float = 0.1

    def __post_init__(self):
        _scalar(self.noise, "noise", low=0.0)

    def __call__(self, obs: MatrixInput, *, rng: np.random.Generator) -> np.ndarray:
        eps = rng.standard_normal(obs.n_agents)
        return _min_ranks(-(obs.resources + self.noise * eps))


@dataclass(frozen=True)
class RandomRanker:
    """Closed-form matrix: a uniformly random ranking (null model: resources random-walk).

    References
    ----------
    Baseline for the matrix of Sect. 4.2.2 of Zhang et al., ITCMA-S, arXiv:2409.06750 (ranking
    fed to Eq. 19).
    """

    def __call__(self, obs: MatrixInput, *, rng: np.random.Generator) -> np.ndarray:
        return rng.permutation(obs.n_agents).astype(np.float64) + 1.0


# ================================================================== LTRHA: result
_AGENT_FIELDS = ("env", "acted", "valence", "desire", "pain", "perception", "pleasure", "arousal",
                 "dominance", "d_bias", "demand", "driver", "rate", "rank", "delta", "resources")


@dataclass(frozen=True)
class LTRHAResult:
    """Replicate runs of the LTRHA resource loop (:func:`simulate_ltrha`).

    Per-agent arrays have shape ``(n_runs, n_steps, n_agents)``; step ``s`` (from 1) is index
    ``s - 1``. Emotions and resources are recorded after the step, resources after the matrix.

    Attributes
    ----------
    agents : tuple of str
    env_names : tuple of str
    habitus : numpy.ndarray of float64
        Mean action valence of each agent, shape ``(n_runs, n_agents)``.
    initial_resources : numpy.ndarray of float64
        ``S_i`` at step 0, shape ``(n_runs, n_agents)``.
    env : numpy.ndarray of int64
        Locale of each agent.
    acted : numpy.ndarray of bool
        Whether the agent acted (probability ``rate``).
    valence : numpy.ndarray of float64
        Valence of the agent's action (NaN if it did not act).
    desire, pain : numpy.ndarray of float64
        Inputs of Eq. 10: sums of the positive / negative valences of the actions in the
        agent's locale this step.
    perception : numpy.ndarray of float64
        The primal impression ``PI_t = desire - pain`` (net valence perceived).
    pleasure, arousal, dominance : numpy.ndarray of float64
        ``P, A, D`` (Eqs. 10-12).
    d_bias, demand, driver : numpy.ndarray of float64
        ``d^bias`` (Eq. 13), ``Ne`` (Eq. 14), ``d`` (Eq. 15).
    rate : numpy.ndarray of float64
        Action probability (Eq. 18) used this step.
    rank : numpy.ndarray of float64
        The matrix's rank (lower = better; ties share a value).
    delta : numpy.ndarray of float64
        Resources received (Eq. 19, after the ``floor`` rule if any).
    resources : numpy.ndarray of float64
        ``S_i`` after the step.
    topic : numpy.ndarray of float64
        ``tpc_env`` per locale (Eq. 17), shape ``(n_runs, n_steps, n_envs)``; NaN if empty.
    seed : numpy.random.SeedSequence
        Parent seed; run ``k`` used child ``k``.
    params : dict
        Settings, for provenance.

    References
    ----------
    LTRHA of Sect. 4 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Eqs. 10-19, Figs. 6-7).
    """

    agents: tuple
    env_names: tuple
    habitus: np.ndarray
    initial_resources: np.ndarray
    env: np.ndarray
    acted: np.ndarray
    valence: np.ndarray
    desire: np.ndarray
    pain: np.ndarray
    perception: np.ndarray
    pleasure: np.ndarray
    arousal: np.ndarray
    dominance: np.ndarray
    d_bias: np.ndarray
    demand: np.ndarray
    driver: np.ndarray
    rate: np.ndarray
    rank: np.ndarray
    delta: np.ndarray
    resources: np.ndarray
    topic: np.ndarray
    seed: np.random.SeedSequence
    params: dict = field(default_factory=dict)

    @property
    def n_runs(self) -> int:
        return self.resources.shape[0]

    @property
    def n_steps(self) -> int:
        return self.resources.shape[1]

    @property
    def n_agents(self) -> int:
        return self.resources.shape[2]

    def to_frame(self) -> pd.DataFrame:
        """One row per run, step and agent.

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``step`` (from 1), ``agent``, ``env`` (locale name), ``habitus``,
            ``acted``, ``valence``, ``desire``, ``pain``, ``PI`` (perception), ``P``, ``A``,
            ``D``, ``d_bias``, ``Ne``, ``d``, ``rate``, ``rank``, ``dS``, ``S`` (after the step).
        """
        R, T, N = self.resources.shape
        run, step, agent = (a.ravel() for a in np.meshgrid(np.arange(R), np.arange(1, T + 1), np.arange(N), indexing="ij"))
        names = np.asarray(self.agents, dtype=object)
        envs = np.asarray(self.env_names, dtype=object)
        return pd.DataFrame(
            {
                "run": run,
                "step": step,
                "agent": pd.Categorical(names[agent], categories=list(self.agents)),
                "env": pd.Categorical(envs[self.env.ravel()], categories=list(self.env_names)),
                "habitus": np.broadcast_to(self.habitus[:, None, :], (R, T, N)).ravel(),
                "acted": self.acted.ravel(),
                "valence": self.valence.ravel(),
                "desire": self.desire.ravel(),
                "pain": self.pain.ravel(),
                "PI": self.perception.ravel(),
                "P": self.pleasure.ravel(),
                "A": self.arousal.ravel(),
                "D": self.dominance.ravel(),
                "d_bias": self.d_bias.ravel(),
                "Ne": self.demand.ravel(),
                "d": self.driver.ravel(),
                "rate": self.rate.ravel(),
                "rank": self.rank.ravel(),
                "dS": self.delta.ravel(),
                "S": self.resources.ravel(),
            }
        )

    def topic_frame(self) -> pd.DataFrame:
        """Topic of each locale, one row per run, step and locale.

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``step`` (from 1), ``env``, ``topic`` (Eq. 17; NaN if empty),
            ``n_present`` (agents in the locale).
        """
        R, T, E = self.topic.shape
        run, step, env = (a.ravel() for a in np.meshgrid(np.arange(R), np.arange(1, T + 1), np.arange(E), indexing="ij"))
        present = np.zeros((R, T, E), np.int64)
        for e in range(E):
            present[..., e] = (self.env == e).sum(axis=-1)
        return pd.DataFrame(
            {
                "run": run,
                "step": step,
                "env": pd.Categorical(np.asarray(self.env_names, dtype=object)[env], categories=list(self.env_names)),
                "topic": self.topic.ravel(),
                "n_present": present.ravel(),
            }
        )

    def inequality(self) -> pd.DataFrame:
        """Resource inequality over time, one row per run and step (step 0 = initial).

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``step``, ``gini`` (:func:`gini` of ``S``; NaN once some holdings
            are negative, where the Gini coefficient is undefined: ``n_negative`` says so),
            ``top_share`` (largest ``S_i / sum S``; above 1 when others hold negative amounts),
            ``min_S``, ``max_S``, ``n_negative`` (agents with ``S_i < 0``) and ``share_negative``
            (their share of the agents: what Eq. 19 as written measures instead of a Gini).
        """
        S = np.concatenate([self.initial_resources[:, None, :], self.resources], axis=1)
        R, T1, _ = S.shape
        total = S.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            top = np.where(total > 0, S.max(axis=-1) / total, np.nan)
        run, step = (a.ravel() for a in np.meshgrid(np.arange(R), np.arange(T1), indexing="ij"))
        return pd.DataFrame(
            {
                "run": run,
                "step": step,
                "gini": np.asarray(gini(S)).ravel(),
                "top_share": top.ravel(),
                "min_S": S.min(axis=-1).ravel(),
                "max_S": S.max(axis=-1).ravel(),
                "n_negative": (S < 0).sum(axis=-1).ravel(),
                "share_negative": (S < 0).mean(axis=-1).ravel(),
            }
        )

    # ------------------------------------------------------------------ display
    def summary(self) -> dict:
        """Final inequality and how resources track habitus, as plain Python numbers: median
        (and 10-90% of runs) of the final Gini -- over the runs where it is defined (no negative
        resources; ``final_gini_undefined_runs`` counts the others; ``None`` if none) -- and of the
        top share, the share of agents in debt, and the mean Spearman correlation of habitus with
        final resources."""
        from scipy.stats import spearmanr

        last = self.inequality()
        last = last[last["step"] == self.n_steps]
        rho = [spearmanr(self.habitus[k], self.resources[k, -1])[0] for k in range(self.n_runs)]

        def q(x):  # median and 10-90% over the runs where the quantity is defined; None where none is
            x = np.asarray(x, dtype=float)
            x = x[np.isfinite(x)]
            return [float(v) for v in np.quantile(x, [0.5, 0.1, 0.9])] if len(x) else None

        g = last["gini"].to_numpy(float)
        return plain({"runs": self.n_runs, "n_agents": self.n_agents, "n_steps": self.n_steps,
                      "ranker": self.params.get("ranker"), "floor": self.params.get("floor"),
                      "final_gini": q(g), "final_gini_undefined_runs": int(np.isnan(g).sum()),
                      "final_top_share": q(last["top_share"]),
                      "share_negative": float((self.resources[:, -1] < 0).mean()),
                      "spearman_habitus_resources": float(np.nanmean(rho)) if self.n_agents > 2 else None})

    def __repr__(self) -> str:
        g = self.inequality()
        g = g[g["step"] == self.n_steps]["gini"].to_numpy(float)
        ranker = str(self.params.get("ranker", "?")).split("(")[0]
        ok = g[np.isfinite(g)]
        gtxt = (f"final Gini median {np.median(ok):.3f}" if len(ok) == len(g) else
                f"final Gini median {np.median(ok):.3f} in {len(ok)} runs (undefined in {len(g) - len(ok)}: debts)"
                if len(ok) else "final Gini undefined (debts in every run)")
        return short_repr("LTRHAResult", f"{self.n_runs} run{'s' * (self.n_runs != 1)}", f"{self.n_agents} agents", f"{self.n_steps} steps",
                          f"ranker={ranker}", gtxt,
                          f"agents in debt at the end {(self.resources[:, -1] < 0).mean():.0%}")

    def _repr_html_(self) -> str:
        s = self.summary()
        fg, bad = s["final_gini"], s["final_gini_undefined_runs"]
        why = f"; undefined in {bad} of {s['runs']} runs (negative resources)" if bad else ""
        rows = [("final Gini of resources", fg[0] if fg else "undefined", tuple(fg[1:]) if fg else None,
                 "median; 10-90% of runs" + why),
                ("final top share", s["final_top_share"][0], tuple(s["final_top_share"][1:]), "median; 10-90% of runs"),
                ("agents in debt at the end", s["share_negative"]),
                ("Spearman(habitus, final resources)", s["spearman_habitus_resources"], None, "mean over runs")]
        return html_card("LTRHAResult", rows, level=None, subtitle=f"ITCMA-S LTRHA loop, {s['runs']} runs",
                         settings={"agents": self.n_agents, "steps": self.n_steps, "ranker": s["ranker"],
                                   "floor": s["floor"]},
                         note=".plot() draws resources per agent (one run) or the Gini over time (several).")

    @plotting
    def plot(self, kind: str | None = None, *, run: int = 0, ax=None):
        """Resources per agent over the steps of one run, or the Gini coefficient over time.

        Parameters
        ----------
        kind : {"resources", "gini"}, optional
            Default: ``resources`` for a single run, ``gini`` (median and 10-90% of runs) for several.
        run : int, optional
            The run shown by ``resources``.
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Zhang et al., ITCMA-S, arXiv:2409.06750, Fig. 7 (resources under the LTRHA matrix).
        """
        kind = ("resources" if self.n_runs == 1 else "gini") if kind is None else kind
        if kind not in ("resources", "gini"):
            raise ValueError(f"kind must be 'resources' or 'gini'; got {kind!r}")
        if not 0 <= int(run) < self.n_runs:
            raise ValueError(f"run must be in 0..{self.n_runs - 1}; got {run!r}")
        ax = new_axes(ax, (7.2, 3.8) if kind == "resources" else (5.5, 3.8))
        steps = np.arange(self.n_steps + 1)
        if kind == "resources":
            S = np.concatenate([self.initial_resources[run][None, :], self.resources[run]], axis=0)
            for i, a in enumerate(self.agents):
                ax.plot(steps, S[:, i], lw=1.4, label=f"{a} (habitus {self.habitus[run, i]:+.2f})")
            ax.axhline(0, color="0.3", lw=0.6)
            ax.set(xlabel="step", ylabel="resources $S_i$", title=f"LTRHA run {run}: resources per agent")
            legend_outside(ax)
        else:
            g = self.inequality().pivot(index="step", columns="run", values="gini").to_numpy()
            ok = np.isfinite(g).all(axis=1)  # steps where every run's Gini is defined (no negative holdings)
            lo, med, hi = (np.where(ok, v, np.nan) for v in np.quantile(np.nan_to_num(g), [0.1, 0.5, 0.9], axis=1))
            ax.fill_between(steps, lo, hi, alpha=0.25, lw=0, label="10-90% of runs")
            ax.plot(steps, med, lw=2, label=f"median of {self.n_runs} runs")
            title = "LTRHA: resource inequality over time"
            if not ok.all():
                first = int(steps[~ok][0])
                title += f"\n(Gini undefined from step {first}: some resources are negative)"
            ax.set(xlabel="step", ylabel="Gini of resources", title=title)
            ax.legend(fontsize=8)
        return ax

    @classmethod
    def _contract_example(cls) -> "LTRHAResult":
        """Two runs of three agents in two locales over three steps, literal numbers
        (``tests/umbrella/test_contracts.py``)."""
        R, T, N = 2, 3, 3
        ramp = np.broadcast_to(np.arange(1.0, T + 1)[None, :, None], (R, T, N))
        agent = np.broadcast_to(np.array([0.5, 1.0, 1.5])[None, None, :], (R, T, N))
        resources = 10.0 + ramp * agent

        def full(v):
            return np.full((R, T, N), v)

        return cls(agents=("a", "b", "c"), env_names=("home", "work"), habitus=np.tile([-0.5, 0.0, 0.5], (R, 1)),
                   initial_resources=np.full((R, N), 10.0), env=np.broadcast_to(np.array([0, 1, 1]), (R, T, N)).copy(),
                   acted=full(True), valence=agent - 1.0, desire=full(1.0), pain=full(0.5), perception=full(0.5),
                   pleasure=full(0.2), arousal=full(0.3), dominance=full(0.1), d_bias=full(0.0), demand=full(0.4),
                   driver=full(0.4), rate=full(0.5), rank=np.broadcast_to(np.array([3.0, 2.0, 1.0]), (R, T, N)).copy(),
                   delta=ramp * 0 + agent, resources=resources, topic=np.full((R, T, 2), 0.5),
                   seed=np.random.SeedSequence(0), params={"ranker": "toy", "floor": None})


# ================================================================== LTRHA: simulation
_RATE_INPUTS = ("resources", "share")


def _names(names, n, default_prefix, what):
    if names is None:
        return tuple(f"{default_prefix}{k}" for k in range(n))
    if isinstance(names, str) or not hasattr(names, "__len__"):
        raise TypeError(f"{what} must be a sequence of {n} strings")
    out = tuple(str(x) for x in names)
    if len(out) != n:
        raise ValueError(f"{what} must have {n} entries; got {len(out)}")
    if len(set(out)) != n or any(not x for x in out):
        raise ValueError(f"{what} must be unique non-empty strings; got {out}")
    return out


def _per_agent(x, n, name):
    a = _real(x, name)
    if a.ndim == 0:
        return np.full(n, float(a))
    if a.shape != (n,):
        raise ValueError(f"{name} must be a scalar or have one value per agent, shape ({n},); got {a.shape}")
    return a.copy()


def _apply_floor(S, dS, floor):
    """Limit losses so that no ``S_i`` falls below ``floor``; scale gains to keep the sum zero."""
    loss = np.minimum(np.maximum(-dS, 0.0), np.maximum(S - floor, 0.0))
    gain = np.maximum(dS, 0.0)
    g = gain.sum()
    removed = loss.sum()
    scaled = gain * (removed / g) if g > 0 else np.zeros_like(gain)
    return scaled - loss


def _run_ltrha(gen, world: "LTRHAParams", out, k):
    """One LTRHA run of ``world``; writes step rows into ``out[name][k]``.

    Draws: first ``N`` normals for the habitus (only when it is not given); then per step, in
    order: (steps > 1, ``p_move > 0``) ``N`` uniforms for moving and ``N`` locale choices; ``N``
    uniforms for acting; ``N`` normals for the valences; then whatever the ranker draws.
    """
    w = world
    N, T, E, ranker, lo, hi = w.n_agents, w.n_steps, w.n_envs, w.ranker, w.s_min, w.s_max
    floor, share, retention, p_move, attraction = w.floor, w.share, w.retention, w.p_move, w.attraction
    action_noise, agents, env_names = w.action_noise, w.agent_names, w.env_names
    h = gen.normal(w.habitus_mean, w.habitus_sd, N) if w.habitus is None else w.habitus.copy()
    env = w.env0.copy()
    S = w.initial_resources.copy()
    wp, wa, wd = w.weights
    hist = np.empty((T, N))
    A_prev = np.zeros(N)
    db_prev = np.zeros(N)
    d = np.zeros(N)
    topic_prev = np.zeros(E)
    table = _allocation_table(N, lo, hi)
    for t in range(T):
        if t > 0 and p_move > 0:
            move = gen.random(N) < p_move
            logits = attraction * np.where(np.isnan(topic_prev), 0.0, topic_prev)
            p = np.exp(logits - logits.max())
            target = gen.choice(E, size=N, p=p / p.sum())
            env = np.where(move, target, env)
        rate = 0.5 * (0.5 + _sigmoid(S / S.sum() if share else S))
        acted = gen.random(N) < rate
        v = h + action_noise * gen.standard_normal(N)
        pos = np.where(acted, np.maximum(v, 0.0), 0.0)
        neg = np.where(acted, np.maximum(-v, 0.0), 0.0)
        desire = np.bincount(env, weights=pos, minlength=E)[env]
        pain = np.bincount(env, weights=neg, minlength=E)[env]
        u = desire - pain
        P = np.tanh(desire) - np.tanh(pain)  # Eq. 10
        lo_t = 0 if retention is None else max(0, t - retention)
        window = hist[lo_t:t]  # retained frames, oldest first
        if t > lo_t:
            A = np.tanh(np.abs(u[None, :] - window).T @ _recency_weights(t - lo_t))  # Eq. 11
            prot = window.mean(axis=0)
        else:
            A = np.zeros(N)
            prot = np.zeros(N)
        D = np.tanh(u - prot)  # Eq. 12
        db = wp * P + wd * D + wa * (1.0 - np.abs(A - A_prev))  # Eq. 13
        ne = 0.5 * np.abs(db - db_prev)  # Eq. 14
        d = d + ne * db  # Eq. 15
        tpc, _ = _topic_by_env(P, A, env, E)  # Eq. 17
        obs = MatrixInput(
            step=t + 1, agents=agents, env_names=env_names, env=_frozen(env), acted=_frozen(acted),
            valence=_frozen(np.where(acted, v, np.nan)), resources=_frozen(S), topic=_frozen(tpc),
            pleasure=_frozen(P), arousal=_frozen(A), dominance=_frozen(D), driver=_frozen(d),
        )
        ranks = ranker(obs, rng=gen)
        try:
            ranks = _check_ranks(ranks, N)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the ranker {ranker!r} returned invalid ranks at step {t + 1}: {exc}") from None
        dS = _changes(ranks, lo, hi, table)  # Eq. 19
        if floor is not None:
            dS = _apply_floor(S, dS, floor)
        S = S + dS
        row = dict(env=env, acted=acted, valence=np.where(acted, v, np.nan), desire=desire, pain=pain,
                   perception=u, pleasure=P, arousal=A, dominance=D, d_bias=db, demand=ne, driver=d,
                   rate=rate, rank=ranks, delta=dS, resources=S)
        for name, value in row.items():
            out[name][k, t] = value
        out["topic"][k, t] = tpc
        hist[t] = u
        A_prev, db_prev, topic_prev = A, db, tpc
    out["habitus"][k] = h


def _parent_seed(rng) -> np.random.SeedSequence:
    """Parent seed of a batch of runs; a Generator contributes a fresh child, so calls differ."""
    if isinstance(rng, np.random.Generator):
        ss = getattr(rng.bit_generator, "seed_seq", None)
        if isinstance(ss, np.random.SeedSequence):
            return ss.spawn(1)[0]
    return as_seed_sequence(rng)


def _n_agents(value, name):
    N = _int(value, name)
    if N <= 2:
        raise ValueError(f"n_agents must be >= 3: the matrix allocation (Eq. 19) is defined for n > 2; got {N}")
    return N


def _at_least_one(value, name):
    return _int(value, name, low=1)


def _ranker(value, name):
    ranker = ContributionRanker() if value is None else value
    if not callable(ranker):
        raise TypeError(f"ranker must be callable as ranker(obs, rng=...); got {type(ranker).__name__}")
    return ranker


def _s_min(value, name):
    return _scalar(value, name, low=0.0)


def _s_max(value, name, values):
    hi = _scalar(value, name, low=0.0)
    if values["s_min"] > hi:
        raise ValueError(f"s_min must be <= s_max; got s_min={values['s_min']}, s_max={hi}")
    return hi


def _initial_resources(value, name, values):
    return _per_agent(value, values["n_agents"], name)


def _floor(value, name, values):
    if value is None:
        return None
    floor = _scalar(value, name)
    S0 = values["initial_resources"]
    if S0.min() < floor:
        raise ValueError(f"initial_resources must be >= floor={floor}; got min {S0.min():.6g}")
    return floor


def _rate_input(value, name, values):
    if value not in _RATE_INPUTS:
        raise ValueError(f"rate_input must be one of {_RATE_INPUTS}; got {value!r}")
    if value == "share" and values["initial_resources"].sum() <= 0:
        raise ValueError("rate_input='share' needs a positive total of initial_resources")
    return value


def _habitus(value, name, values):
    return None if value is None else _per_agent(value, values["n_agents"], name)


def _real_number(value, name):
    return _scalar(value, name)


def _non_negative(value, name):
    return _scalar(value, name, low=0.0)


def _probability(value, name):
    return _scalar(value, name, low=0.0, high=1.0)


def _retention(value, name):
    return None if value is None else _int(value, name, low=1)


def _three_weights(value, name):
    w = _weights(value)
    if any(x.ndim != 0 for x in w):
        raise ValueError("simulate_ltrha takes three scalar weights (w_P, w_A, w_D)")
    return tuple(float(x) for x in w)


def _env0(value, name, values):
    return _initial_locales(value, values["n_agents"], values["n_envs"])


def _agent_names(value, name, values):
    return _names(value, values["n_agents"], "a", "agent_names")


def _env_names(value, name, values):
    return _names(value, values["n_envs"], "loc", "env_names")


@validated
@dataclass(frozen=True, eq=False)
class LTRHAParams:
    """The world of an LTRHA simulation (:func:`simulate_ltrha` describes every parameter):
    population, locales, the matrix and its range, resources, habitus, emotions and movement.

    Checked in the order below with :func:`simulate_ltrha`'s messages and kept normalised:
    ``ranker`` ``None`` becomes ``ContributionRanker()``, ``initial_resources`` (and a given
    ``habitus``) one value per agent, ``weights`` three floats, ``env0`` one locale per agent,
    ``agent_names``/``env_names`` tuples (defaults ``"a0", ...`` and ``"loc0", ...``).
    """

    n_agents: int = 6
    n_steps: int = 75
    n_envs: int = 8
    ranker: Callable | None = None
    s_min: float = 0.1
    s_max: float = 0.5
    initial_resources: object = 1.0
    floor: float | None = None
    rate_input: str = "resources"
    habitus: object = None
    habitus_mean: float = 0.25
    habitus_sd: float = 0.5
    action_noise: float = 0.5
    p_move: float = 0.2
    attraction: float = 2.0
    retention: int | None = None
    weights: tuple = (1 / 3, 1 / 3, 1 / 3)
    env0: object = None
    agent_names: object = None
    env_names: object = None

    _parameter_constraints = {
        "n_agents": Check(_n_agents), "n_steps": Check(_at_least_one), "n_envs": Check(_at_least_one),
        "ranker": Check(_ranker), "s_min": Check(_s_min), "s_max": Relation(_s_max),
        "initial_resources": Relation(_initial_resources), "floor": Relation(_floor),
        "rate_input": Relation(_rate_input), "habitus": Relation(_habitus), "habitus_mean": Check(_real_number),
        "habitus_sd": Check(_non_negative), "action_noise": Check(_non_negative), "p_move": Check(_probability),
        "attraction": Check(_real_number), "retention": Check(_retention), "weights": Check(_three_weights),
        "env0": Relation(_env0), "agent_names": Relation(_agent_names), "env_names": Relation(_env_names),
    }

    @property
    def share(self) -> bool:
        """Whether Eq. 18 reads resource shares (``rate_input="share"``)."""
        return self.rate_input == "share"


def _initial_locales(env0, N: int, E: int) -> np.ndarray:
    """Initial locale per agent: agent ``i`` in locale ``i mod E``, or ``env0`` checked."""
    if env0 is None:
        return np.arange(N, dtype=np.int64) % E
    e0 = np.asarray(env0)
    if e0.dtype == np.bool_ or not np.issubdtype(e0.dtype, np.integer):
        raise TypeError(f"env0 must be integer locale indices; got dtype {e0.dtype}")
    if e0.shape != (N,):
        raise ValueError(f"env0 must have one locale per agent, shape ({N},); got {e0.shape}")
    if e0.min() < 0 or e0.max() >= E:
        raise ValueError(f"env0 values must be in [0, n_envs) = [0, {E}); got [{e0.min()}, {e0.max()}]")
    return e0.astype(np.int64)


def _outputs(R: int, T: int, N: int, E: int) -> dict:
    """Empty output arrays of ``R`` runs: agent x step fields, topics per locale, habitus."""
    dtypes = {"env": np.int64, "acted": np.bool_}
    out = {name: np.empty((R, T, N), dtypes.get(name, np.float64)) for name in _AGENT_FIELDS}
    out["topic"] = np.empty((R, T, E))
    out["habitus"] = np.empty((R, N))
    return out


def _runs(R: int, progress):
    """Run indices, behind a tqdm bar when shown (default: more than 200 runs)."""
    show = (R > 200) if progress is None else bool(progress)
    if not show:
        return range(R)
    from normlab._display import tqdm

    return tqdm(range(R), desc="LTRHA runs", unit="run")


def simulate_ltrha(
    n_agents: int = 6,
    n_steps: int = 75,
    *,
    n_envs: int = 8,
    ranker: Callable | None = None,
    s_min: float = 0.1,
    s_max: float = 0.5,
    initial_resources=1.0,
    floor: float | None = None,
    rate_input: str = "resources",
    habitus=None,
    habitus_mean: float = 0.25,
    habitus_sd: float = 0.5,
    action_noise: float = 0.5,
    p_move: float = 0.2,
    attraction: float = 2.0,
    retention: int | None = None,
    weights=(1 / 3, 1 / 3, 1 / 3),
    env0=None,
    agent_names=None,
    env_names=None,
    n_runs: int = 1,
    progress: bool | None = None,
    rng=None,
) -> LTRHAResult:
    """Simulate the LTRHA loop: PAD emotions, Eq. 18 actions, Eq. 17 topics, Eq. 19 matrix.

    The keywords are a convenience: they are checked and built into :class:`LTRHAParams` for
    :func:`play_ltrha`, the engine.

    The paper's world is an LLM sandbox (IrollanValley: six agents, eight areas, 75 steps).
    This is normlab's minimal closed-form world around the paper's equations; its rules and the
    defaults of its parameters (habitus, noise, movement, ``s_min``, ``s_max``) are normlab's
    choices, as the paper gives none. Each step:

    1. *Locale.* (From step 2.) With probability ``p_move`` an agent moves to a locale drawn
       with probability proportional to ``exp(attraction * tpc_env)`` of the previous step
       (empty locales count as topic 0; ``attraction = 0`` is uniform).
    2. *Action* (Eq. 18). Agent ``i`` acts with probability ``rate_i = (0.5 + sigmoid(x_i))/2``,
       ``x_i = S_i`` (``rate_input="resources"``) or ``S_i / sum_j S_j`` (``"share"``). An action
       has valence ``v_i = h_i + action_noise * eps`` (``h_i``: the agent's habitus).
    3. *Emotions* (Eqs. 10-12). Every agent in a locale perceives all actions taken there:
       ``desire`` and ``pain`` are the sums of their positive and negative valences, and the
       primal impression is ``PI_t = desire - pain``. ``P`` by Eq. 10; ``A`` by Eq. 11 with
       ``diff = |PI_t - PI_n|`` over the retained frames (the last ``retention`` steps, all if
       ``None``); ``D`` by Eq. 12 with the signed ``diff = PI_t - Prot_{t-1}``, the protention
       being the mean of the retained frames (a better-than-expected step raises dominance).
       With no retained frame (step 1) ``A = 0`` and ``Prot = 0``.
    4. *Driver* (Eqs. 13-15), from ``A_0 = d^bias_0 = d_0 = 0``. The driver is an output: it
       does not feed back into actions (the paper gives no closed form for that feedback).
    5. *Topic* (Eq. 17) of every locale over the agents in it.
    6. *Matrix* (Eq. 19). ``ranker`` ranks all ``n`` agents (globally, as the paper's matrix
       receives the global resource structure); each agent's ``S_i`` grows by its Eq. 19 amount
       (ties share), so the total is conserved. With ``floor``, a loser pays at most down to
       ``floor`` and the gains are scaled down to match (still zero-sum).

    Parameters
    ----------
    n_agents : int, optional
        Number of agents ``n >= 3`` (Eq. 19 needs ``n > 2``). Default 6, as in the paper.
    n_steps : int, optional
        Steps per run (default 75, as in Figs. 6-7).
    n_envs : int, optional
        Number of locales (sub-environments); default 8, as in IrollanValley.
    ranker : Ranker, optional
        The matrix (see :class:`Ranker`); default ``ContributionRanker(noise=0.1)``.
    s_min, s_max : float, optional
        Eq. 19 range, ``0 <= s_min <= s_max``. The paper gives no values.
    initial_resources : float or array_like of float, optional
        ``S_i`` at step 0 (paper: 1).
    floor : float, optional
        Lowest allowed ``S_i`` (e.g. 0). Default ``None``: Eq. 19 as written, resources may go
        negative ("its existing resources will also be removed").
    rate_input : {"resources", "share"}, optional
        Argument of the sigmoid in Eq. 18 (see step 2).
    habitus : array_like of float, optional
        Mean valence ``h_i`` of each agent's actions (how social / pleasant its habitus is).
        Default: drawn per run from ``N(habitus_mean, habitus_sd^2)``.
    habitus_mean, habitus_sd : float, optional
        Distribution of the habitus when ``habitus`` is not given.
    action_noise : float, optional
        Standard deviation of an action's valence around the habitus.
    p_move : float, optional
        Probability per step of moving to a (possibly the same) locale.
    attraction : float, optional
        Preference for locales with a positive topic when moving.
    retention : int, optional
        Number of retained frames for Eqs. 11-12 (default ``None``: all past steps, as Eq. 11's
        sum over ``n = 1 .. t - 1`` is written). With a window of ``m`` frames the Eq. 11
        weights are those of ``t - 1 = m`` frames, ``2 n / (m (m + 1))``.
    weights : sequence of three float, optional
        ``(w_P, w_A, w_D)`` of Eq. 13.
    env0 : array_like of int, optional
        Initial locale of each agent (default: agent ``i`` in locale ``i mod n_envs``, like the
        agents' houses in IrollanValley).
    agent_names, env_names : sequence of str, optional
        Labels (default ``"a0", ...`` and ``"loc0", ...``).
    n_runs : int, optional
        Independent replicates; run ``k`` uses child ``k`` of the seed.
    progress : bool, optional
        Show a tqdm bar over runs (default: when more than 200 runs).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, optional
        Seed.

    Returns
    -------
    LTRHAResult
        Agent x step arrays; ``to_frame()`` (tidy, one row per run, step and agent),
        ``topic_frame()`` and ``inequality()`` (Gini of ``S`` over time).

    Raises
    ------
    ValueError
        On invalid settings (e.g. ``n_agents <= 2``, ``s_min > s_max``, weights not summing to
        1, ``floor`` above the initial resources, a ranker returning invalid ranks).
    TypeError
        On arguments of the wrong type (e.g. a ranker that is not callable).

    References
    ----------
    Implements the LTRHA loop of Sect. 4 of Zhang et al., ITCMA-S, arXiv:2409.06750, with
    Eqs. 10-15 (emotions, driver), 17 (topic), 18 (action rate) and 19 (matrix allocation);
    the outputs correspond to its Figs. 6 (driver, PAD) and 7 (resources, topics).

    Examples
    --------
    >>> res = simulate_ltrha(rng=1)
    >>> res.inequality().tail(1)  # doctest: +SKIP
    """
    _n_agents(n_agents, "n_agents")
    _at_least_one(n_steps, "n_steps")
    _at_least_one(n_envs, "n_envs")
    R = _int(n_runs, "n_runs", low=1)
    params = LTRHAParams(
        n_agents=n_agents, n_steps=n_steps, n_envs=n_envs, ranker=ranker, s_min=s_min, s_max=s_max,
        initial_resources=initial_resources, floor=floor, rate_input=rate_input, habitus=habitus,
        habitus_mean=habitus_mean, habitus_sd=habitus_sd, action_noise=action_noise, p_move=p_move,
        attraction=attraction, retention=retention, weights=weights, env0=env0, agent_names=agent_names,
        env_names=env_names)
    return play_ltrha(params, n_runs=R, progress=progress, rng=rng)


def play_ltrha(params: LTRHAParams, *, n_runs: int = 1, progress: bool | None = None, rng=None) -> LTRHAResult:
    """The engine of :func:`simulate_ltrha`: ``n_runs`` replicates of the world ``params`` (run
    ``k`` uses child ``k`` of the seed; same runs as the keyword call)."""
    p = params
    R = _int(n_runs, "n_runs", low=1)
    N, T, E, S0 = p.n_agents, p.n_steps, p.n_envs, p.initial_resources
    seed = _parent_seed(rng)
    # spawn from a pristine copy: a user's SeedSequence is not advanced, so run k is always child k
    children = spawn(np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size), R)
    out = _outputs(R, T, N, E)
    for k in _runs(R, progress):
        _run_ltrha(as_generator(children[k]), p, out, k)
    summary = dict(n_agents=N, n_steps=T, n_envs=E, ranker=repr(p.ranker), s_min=p.s_min, s_max=p.s_max,
                   floor=p.floor, rate_input=p.rate_input, habitus_mean=p.habitus_mean, habitus_sd=p.habitus_sd,
                   action_noise=p.action_noise, p_move=p.p_move, attraction=p.attraction, retention=p.retention,
                   weights=p.weights, n_runs=R)
    return LTRHAResult(
        agents=p.agent_names,
        env_names=p.env_names,
        habitus=out.pop("habitus"),
        initial_resources=np.broadcast_to(S0, (R, N)).copy(),
        seed=seed,
        params=summary,
        **out,
    )
