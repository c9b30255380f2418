"""Which memory states decide a prediction: sensitivity of a critical mass or a convergence outcome
to each state's strategy, weighted by how unsure the fit is there.

A strategy table has up to 1 365 states (two names, memory 5), and a prediction rests on few of
them. For a committed-minority experiment at the predicted count ``c`` the quantity the published
rule reads is each run's challenger share over the last three rounds of the window, ``Y`` (the
rule asks whether its mean over the runs reaches 0.95). Raising the logit of p(challenger | s) by
``d`` in one state ``s`` changes ``E[Y]`` by ``d * S_s`` with the score-function (likelihood-ratio)
identity

    S_s = dE[Y] / d logit p_s = Cov(Y, sum over the run's decisions in s of (y - p_s)),

estimated from simulated runs (each with its run effect, the table of a posterior draw). With
``sd_s`` the posterior standard deviation of the state's logit, ``S_s**2 * sd_s**2`` is the part of
the prediction's variance that the uncertainty about state ``s`` causes (to first order, states
independent): its **share** says how far the prediction can move through that state given what the
data say about it, and the **importance** is its square root. The Monte Carlo noise of the
estimate is removed from each term (``S_s**2 - se_s**2``, floored at 0), so states the simulations
barely touched do not pile up noise.
Beside each state: how many decisions of the fitted data it holds. The share of the total
importance carried by states the data barely saw (fewer than ``thin`` decisions) says how much of
the prediction rests on the model's extrapolation rather than on observed behaviour -- the states
an adaptive experiment should visit (``normlab tip``).

For a convergence prediction ``Y`` is 1 when a run from empty memories ends on the name asked for.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3,
Figs. S8-S10 (strategies by memory state); P. W. Glynn, Commun. ACM 33, 75 (1990) (likelihood-ratio
gradient estimation).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, load_result, new_axes, plain, plotting, save_result, short_repr
from normlab._rng import spawn
from normlab._validate import check_int
from normlab.theory import StrategyTable, strategy_game
from normlab.theory.criteria import PUBLISHED_WINDOW

from ..fit.inputs import state_labels
from ..fit.posterior import StrategyFit
from ..fit.run_effects import RunEffects, run_effect_values

__all__ = ["StateSensitivity", "state_sensitivity", "THIN_DECISIONS"]

#: States with fewer decisions than this in the fitted data count as barely seen.
THIN_DECISIONS = 20


@dataclass(frozen=True)
class StateSensitivity:
    """How much each memory state moves a prediction, and how much the data say about it.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per state visited by the simulations: ``state`` (index), ``label``, ``decisions``
        (the fitted data's decisions there), ``p`` (posterior mean of p(target | state)), ``sd_logit``
        (its posterior sd), ``visits`` (simulated decisions per run), ``sensitivity`` (dE[Y] per
        unit of logit), ``se`` (its Monte Carlo standard error), ``importance`` (``sqrt(max(
        sensitivity**2 - se**2, 0)) * sd_logit``), ``share`` (of the prediction's variance from the
        states' uncertainty: ``importance**2`` over its sum); sorted by importance.
    quantity : str
        What ``Y`` is (``"window share of Q, overturn_M at 8 committed"``, ...).
    target : str
        The name whose probability the logits are of (the challenger; the consensus name).
    n_runs : int
    thin : int
        Decisions below which a state counts as barely seen.
    settings : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3; Glynn (1990).
    """

    table: pd.DataFrame
    quantity: str
    target: str
    n_runs: int
    thin: int = THIN_DECISIONS
    settings: dict = field(default_factory=dict)

    @property
    def thin_share(self) -> float:
        """Share of the prediction's variance from states with fewer than ``thin`` decisions."""
        t = self.table
        tot = float(t["share"].sum())
        return float(t.loc[t["decisions"] < self.thin, "share"].sum() / tot) if tot > 0 else float("nan")

    def top(self, k: int = 10) -> pd.DataFrame:
        return self.table.head(int(k)).reset_index(drop=True)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def summary(self, k: int = 10) -> dict:
        """Plain Python: the quantity, the share resting on barely seen states and the top ``k`` states."""
        rows = [{"state": r["label"] or "(empty)", "decisions": int(r["decisions"]), "p": r["p"],
                 "sd_logit": r["sd_logit"], "sensitivity": r["sensitivity"], "importance": r["importance"],
                 "share": r["share"]} for _, r in self.top(k).iterrows()]
        return plain({"quantity": self.quantity, "target": self.target, "n_runs": self.n_runs,
                      "thin_decisions": self.thin, "thin_share": self.thin_share, "states": rows})

    def __repr__(self) -> str:
        if not self.table["importance"].gt(0).any():
            return short_repr("StateSensitivity", self.quantity, f"no state's effect stands out of the Monte Carlo "
                              f"noise of {self.n_runs} runs (more runs: n_runs=)")
        t = self.top(3)
        tops = "; ".join(f"{r['label'] or '(empty)'} ({int(r['decisions'])} decisions, {r['share']:.0%})"
                         for _, r in t.iterrows())
        return short_repr("StateSensitivity", self.quantity, f"{self.thin_share:.0%} of its spread rests on states with fewer "
                          f"than {self.thin} decisions", f"top: {tops}")

    def _repr_html_(self) -> str:
        rows = [(r["label"] or "(empty)", r["importance"], None,
                 f"{int(r['decisions'])} decisions; dE/dlogit {fmt(r['sensitivity'])}; sd {fmt(r['sd_logit'])}")
                for _, r in self.top(8).iterrows()]
        return html_card("StateSensitivity", rows, subtitle=self.quantity,
                         settings={"runs": self.n_runs, "share on barely seen states": f"{self.thin_share:.0%}"},
                         note=".plot() draws the most important states; .to_frame() lists every visited state.")

    def save(self, path) -> "Path":
        """Write to the folder ``path`` (``result.json`` + ``table.parquet``); :meth:`load` reads it."""
        return save_result(path, type(self), {"quantity": self.quantity, "target": self.target, "n_runs": self.n_runs,
                                              "thin": self.thin, "settings": self.settings}, {"table": self.table})

    @classmethod
    def load(cls, path) -> "StateSensitivity":
        meta, t = load_result(path, cls)
        return cls(table=t["table"], quantity=meta["quantity"], target=meta["target"], n_runs=int(meta["n_runs"]),
                   thin=int(meta["thin"]), settings=meta["settings"])

    @plotting
    def plot(self, k: int = 15, *, ax=None):
        """Horizontal bars of the ``k`` most important states (importance = ``|dE[Y]/dlogit|`` x posterior
        sd), dark where the data saw fewer than ``thin`` decisions.

        Returns
        -------
        matplotlib.axes.Axes
        """
        t = self.top(k).iloc[::-1]
        ax = new_axes(ax, (7.6, 0.32 * len(t) + 1.4))
        thin = t["decisions"] < self.thin
        ax.barh(range(len(t)), t["importance"], color=np.where(thin, "C3", "C0"))
        ax.set_yticks(range(len(t)))
        ax.set_yticklabels([f"{lab or '(empty)'}  [{int(n)}]" for lab, n in zip(t["label"], t["decisions"])],
                           fontsize=7)
        ax.set(xlabel=f"importance: |dE[Y]/d logit p({self.target} | state)| x posterior sd (Monte Carlo noise removed)",
               title=f"{self.quantity}: {self.thin_share:.0%} of the importance on states with < {self.thin} "
                     "decisions in the data (red)")
        ax.title.set_fontsize(8)
        return ax

    @classmethod
    def _contract_example(cls) -> "StateSensitivity":
        """Three memory states' weight in a flip prediction, literal numbers (``tests/umbrella/test_contracts.py``)."""
        imp = np.array([0.3, 0.2, 0.05])
        table = pd.DataFrame({"state": [4, 1, 0], "label": ["B,B", "A,A", ""], "decisions": [3, 40, 80],
                              "p": [0.9, 0.2, 0.5], "sd_logit": [1.2, 0.3, 0.2], "visits": [5.0, 20.0, 1.0],
                              "sensitivity": [0.25, 0.6, 0.2], "se": [0.02, 0.03, 0.05], "importance": imp,
                              "share": imp ** 2 / (imp ** 2).sum()})
        return cls(table=table, quantity="P(flip), overturn_A at 2 committed", target="B", n_runs=200)


def _decision_states(players, answers, committed, init_name, N, W, H):
    """Per uncommitted decision of one run: its memory state (stable encoding) and its choice."""
    B = W * W
    offs = [sum(B ** j for j in range(k)) for k in range(H + 1)]
    mem = [[] for _ in range(N)]
    for a in range(N):
        if not committed[a] and init_name[a] >= 0:
            mem[a] = [init_name[a] * W + init_name[a]] * H
    states, choices = [], []
    for (i, j), (ci, cj) in zip(players, answers):
        for a, c in ((i, ci), (j, cj)):
            if not committed[a]:
                m = mem[a]
                v = 0
                for e in m:
                    v = v * B + e
                states.append(offs[len(m)] + v)
                choices.append(c)
        for a, own, other in ((i, ci, cj), (j, cj, ci)):
            if not committed[a]:
                m = mem[a]
                m.append(own * W + other)
                if len(m) > H:
                    m.pop(0)
    return np.asarray(states, np.int64), np.asarray(choices, np.int64)


def state_sensitivity(fit, *, n_agents: int, majority: str | None = None, committed: int = 0,
                      target: str | None = None, data_counts=None, window: int = PUBLISHED_WINDOW,
                      n_runs: int = 2000, run_effects="fit", thin: int = THIN_DECISIONS, rng=None) -> StateSensitivity:
    """Sensitivity of a committed-minority experiment (or a convergence outcome) to each memory state.

    Parameters
    ----------
    fit : StrategyFit
        Two names.
    n_agents : int
    majority : str, optional
        The consensus attacked (runs start with every uncommitted memory full of it and
        ``committed`` agents committed to the other name); None: runs from empty memories, ``Y``
        = the run ends on ``target`` (a convergence prediction).
    committed : int, optional
        Committed agents (the predicted critical mass).
    target : str, optional
        The name whose probability the logits are of: default the challenger (committed runs) or
        the first name.
    data_counts : array_like, shape (n_states, 2), optional
        Decisions per state in the data (default: the fit's training counts).
    window : int, optional
        Rounds per committed run (the published rule's window; ``Y`` is the mean challenger share
        over its last three rounds); convergence runs last up to ``10 * window`` rounds.
    n_runs : int, optional
        Simulated runs (each with a posterior draw of the table and its own run effect).
    run_effects : "fit", RunEffects or None, optional
    thin : int, optional
    rng : optional

    Returns
    -------
    StateSensitivity

    References
    ----------
    Glynn (1990); Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table S3.
    """
    if not isinstance(fit, StrategyFit) or fit.n_names != 2:
        raise TypeError("state_sensitivity needs a two-name StrategyFit")
    N = check_int(n_agents, "n_agents", low=2)
    R = check_int(n_runs, "n_runs", low=10)
    W_rounds = check_int(window, "window", low=3)
    names = fit.names
    if majority is not None and majority not in names:
        raise ValueError(f"majority must be one of {names}; got {majority!r}")
    c = check_int(committed, "committed", low=0, high=N - 1)
    challenger = None if majority is None else (names[1] if names[0] == majority else names[0])
    tgt = target if target is not None else (challenger if challenger is not None else names[0])
    if tgt not in names:
        raise ValueError(f"target must be one of {names}; got {tgt!r}")
    ti = names.index(tgt)
    H = fit.memory
    eff = RunEffects.from_dict(fit.meta.get("run_effects")) if isinstance(run_effects, str) else \
        (run_effects or RunEffects.none())
    s_tab, s_eff, s_run = spawn(rng, 3)
    D = min(R, 100)
    tabs, index = fit.tables(D, rng=s_tab, return_index=True)
    logits = np.array([np.log(np.clip(t.table[:, ti], 1e-12, 1)) - np.log(np.clip(1 - t.table[:, ti], 1e-12, 1))
                       for t in tabs])
    draws = eff.draws(D, rng=s_eff, index=index if eff.kind == "joint" else None)  # a joint fit's: paired
    g = np.random.default_rng(s_run)
    per = -(-R // D)
    S = fit.n_states
    mask = np.zeros(N, bool)
    if c:
        mask[N - c:] = True
    init = np.full(N, -1 if majority is None else names.index(majority), np.int64)
    sums = np.zeros(S)
    cross = np.zeros(S)
    sq = np.zeros(S)
    visits = np.zeros(S)
    ys = []
    scores = []
    draw_of = []
    for d in range(D):
        if eff.active:
            bb, kk = run_effect_values(draws[d], [per], rng=g)
        else:
            bb, kk = np.zeros(per), np.ones(per)
        base = logits[d]
        for r in range(per):
            # the run's table: logit of the target kappa * L + b (b acts towards name 1 in the
            # effects' convention; flip its sign when the target is name 0)
            sign = 1.0 if ti == 1 else -1.0
            lt = kk[r] * base + sign * bb[r]
            with np.errstate(over="ignore"):  # a logit of +-inf (a table at 0 or 1) gives exactly 0 or 1
                pt = 1.0 / (1.0 + np.exp(-lt))
            tab = np.empty((S, 2))
            tab[:, ti] = pt
            tab[:, 1 - ti] = 1.0 - pt
            kw = dict(n_agents=N, memory=H, n_runs=1, names=names, record_decisions=True, progress=False,
                      rng=g.integers(2**63))
            with warnings.catch_warnings():  # runs that do not converge in time are expected here
                warnings.simplefilter("ignore", RuntimeWarning)
                res = _play(StrategyTable(tab, memory=H, names=names), majority, c, challenger, W_rounds, N, kw)
            pl, an, ln = res.interactions
            T = int(ln[0])
            st, ch = _decision_states(pl[0, :T], an[0, :T], res.committed, init if majority is not None else
                                      np.full(N, -1, np.int64), N, 2, H)
            if majority is None:  # a run stopped on 3N consecutive successes ends on the name it repeats
                y = float(res.stop_reason[0] == "streak" and T > 0 and int(an[0, T - 1, 0]) == ti)
            else:
                y = _window_share(an[0, :T], pl[0, :T], res.committed, names.index(challenger), N, W_rounds)
            hit = (ch == ti).astype(float)
            sc = np.zeros(S)
            np.add.at(sc, st, kk[r] * (hit - pt[st]))
            np.add.at(visits, st, 1.0)
            ys.append(y)
            scores.append(sc)
            draw_of.append(d)
    Y = np.asarray(ys)
    M = np.asarray(scores)  # (runs, S)
    n = len(Y)
    # centred within each posterior draw: the spread of Y between draws carries no information
    # about a state's effect and would only add noise (the scores have mean 0 within every draw)
    dr = np.asarray(draw_of)
    ybar = np.bincount(dr, weights=Y) / np.maximum(np.bincount(dr), 1)
    yc = Y - ybar[dr]
    dof = max(n - D, 1)
    sens = yc @ M / dof
    se = np.sqrt(np.maximum(((yc[:, None] * M - sens) ** 2).sum(axis=0) / dof / n, 0.0))
    seen = visits > 0
    counts = fit.counts if data_counts is None else np.asarray(data_counts, float)
    sd = logits.std(axis=0, ddof=1)
    labels = state_labels(names, H)
    tab = pd.DataFrame({"state": np.flatnonzero(seen), "label": [labels[s] for s in np.flatnonzero(seen)],
                        "decisions": counts.sum(axis=1)[seen], "p": (1 / (1 + np.exp(-logits))).mean(axis=0)[seen],
                        "sd_logit": sd[seen], "visits": visits[seen] / n, "sensitivity": sens[seen], "se": se[seen]})
    var = np.maximum(tab["sensitivity"] ** 2 - tab["se"] ** 2, 0.0) * tab["sd_logit"] ** 2
    tab["importance"] = np.sqrt(var)
    tot = var.sum()
    tab["share"] = var / tot if tot > 0 else 0.0
    tab = tab.sort_values("importance", ascending=False).reset_index(drop=True)
    if majority is None:
        q = f"P(a run from empty memories ends on {tgt})"
    else:
        q = f"overturn_{majority} at {c} committed: {challenger}'s share over rounds {W_rounds - 2}-{W_rounds}"
    return StateSensitivity(table=tab, quantity=q, target=tgt, n_runs=n, thin=int(thin),
                            settings={"n_agents": N, "memory": H, "committed": c, "majority": majority,
                                      "window": W_rounds, "draws": D, "run_effects": eff.active})


def _play(table, majority, c, challenger, W, N, kw):
    """One simulated run: from empty memories to 3N consecutive successes (at most 10 windows),
    or ``W`` rounds from a consensus on ``majority`` with ``c`` agents committed to ``challenger``."""
    if majority is None:
        return strategy_game(table, stop="streak", max_interactions=10 * W * N, **kw)
    return strategy_game(table, committed=c, committed_name=challenger, initial=f"consensus:{majority}", stop="max",
                         max_interactions=W * N, **kw)


def _window_share(answers, players, committed, y, N, W) -> float:
    """Challenger share among uncommitted productions over rounds ``W - 2 .. W``."""
    lo, hi = (W - 3) * N, W * N
    a = np.asarray(answers)[lo:hi].reshape(-1)
    p = np.asarray(players)[lo:hi].reshape(-1)
    unc = ~np.asarray(committed)[p]
    n = unc.sum()
    return float((a[unc] == y).sum() / n) if n else math.nan


# The type tag of saved results (normlab.load) and pickles name StateSensitivity by its path before the regroup into
# sub-packages (issue 30), which still imports it: folders saved before and after load alike.
StateSensitivity.__module__ = "normlab.calibration.sensitivity"
