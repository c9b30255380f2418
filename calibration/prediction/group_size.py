"""Collective bias as a function of group size: one strategy table, N from 4 to 1 000, and N -> infinity.

Populations of ``N`` agents sharing one strategy table ``p(name | memory)`` play the memory-H game
(:func:`normlab.theory.strategy_game`) from empty memories for ``max_rounds`` population rounds.
Each run is read two ways:

``consensus`` (Flint Ashery et al. 2025, Methods)
    The population converges when 95 % of its last ``3N`` interactions succeed; the winner is the
    name produced most in the three rounds up to that moment; ``"none"`` if it never happens
    within ``max_rounds``. (The published runs stop at ``3N`` *consecutive* successes instead;
    that rule becomes unreachable for any table with residual noise as ``N`` grows, the 95 % rule
    only when the noise exceeds about 5 %.)
``majority``
    The name produced most over the last three rounds: which convention the population has
    settled on, whether or not it meets the convergence rule.

The limit ``N -> infinity`` comes from the table directly
(:func:`normlab.theory.memory_mean_field.strategy_mean_field`): the deterministic map on the
distribution of memory states, iterated from the empty memory to its fixed point. Comparing the
limit with ``p(name | empty memory)`` -- the individual bias an agent shows before any interaction
(Flint Ashery et al. 2025, Fig. 2A) -- classifies the collective bias (Flint Ashery, Aiello, Pastor-Satorras &
Baronchelli): interaction **amplifies** an individual bias (same name, stronger), **creates** one
where there was none, or **overrides** it (the other name wins).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Fig. 2;
A. Flint Ashery, L. M. Aiello, R. Pastor-Satorras, A. Baronchelli, arXiv:2510.22422.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import plotting
from normlab._rng import spawn
from normlab._validate import check_int
from normlab.theory import StrategyMeanField, StrategyTable, clopper_pearson, strategy_game, strategy_mean_field

from ..fit.posterior import StrategyFit, load_fit
from .readings import table_draws

__all__ = ["GroupSizeCurve", "group_size_curve", "DEFAULT_SIZES"]

#: Population sizes of the default curve.
DEFAULT_SIZES = (4, 6, 8, 12, 16, 24, 32, 48, 64, 100, 150, 200, 300, 500, 1000)
NONE = "none"
READINGS = ("consensus", "majority")


@dataclass(frozen=True)
class GroupSizeCurve:
    """P(a population converges on / settles on each name) against N, with the mean-field limit.

    Attributes
    ----------
    names : tuple of str
    memory : int
    curve : pandas.DataFrame
        ``n_agents``, ``reading`` (``"consensus"``: 95 % rule; ``"majority"``: name most produced
        at the end), ``name`` (a name or ``"none"``), ``runs``, ``n_runs``, ``p`` and ``low``,
        ``high`` (Clopper-Pearson 95 %: the Monte Carlo error of ``n_runs`` runs).
    speed : pandas.DataFrame
        ``n_agents``, ``converged`` (fraction of runs meeting the 95 % rule), ``rounds_median``,
        ``rounds_mean`` (population rounds to convergence of the converging runs).
    limit : dict
        ``p_majority`` and ``p_consensus`` (name -> probability as ``N -> infinity``, and
        ``"none"``), ``final_share``, ``final_success``, ``rounds_to_95``, ``outcome``, ``stable``
        -- from the mean field of the table (with ``n_draws``: fractions of posterior draws).
    limit_draws : pandas.DataFrame
        One row per posterior draw (``draw``, ``outcome``, ``consensus``, ``share_<name>``,
        ``success``); a single row ``draw = -1`` for one table.
    individual : dict
        ``p(name | empty memory)`` per name: mean and 95 % interval over 400 posterior draws of a
        fit (for a single table, ``low = high = p``).
    regime : str
        ``"amplifies"``, ``"creates"``, ``"overrides"`` (interaction and the individual bias, see
        the module docstring), ``"no collective bias"`` or ``"undetermined"``.
    mean_field : StrategyMeanField
        The mean-field trajectory of the (mean) table from empty memories.
    settings : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods and Fig. 2;
    Flint Ashery, Aiello, Pastor-Satorras & Baronchelli, arXiv:2510.22422.
    """

    names: tuple
    memory: int
    curve: pd.DataFrame
    speed: pd.DataFrame
    limit: dict
    limit_draws: pd.DataFrame
    individual: dict
    regime: str
    mean_field: object
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """The curve in long format, with the limit as rows ``n_agents = inf`` (``runs``,
        ``n_runs``, ``low``, ``high`` NaN)."""
        rows = []
        for reading, key in (("consensus", "p_consensus"), ("majority", "p_majority")):
            for nm, p in self.limit[key].items():
                rows.append({"n_agents": np.inf, "reading": reading, "name": nm, "runs": np.nan, "n_runs": np.nan,
                             "p": p, "low": np.nan, "high": np.nan})
        return pd.concat([self.curve, pd.DataFrame(rows)], ignore_index=True)

    def p(self, name: str, *, reading: str = "consensus") -> pd.Series:
        """P(``name``) against N (index ``n_agents``) for one reading."""
        c = self.curve[(self.curve["reading"] == reading) & (self.curve["name"] == name)]
        return c.set_index("n_agents")["p"]

    def summary(self) -> dict:
        """JSON-friendly summary: the curve's end points, the limit, the individual bias, the regime."""
        def fin(v):
            return None if v is None or (isinstance(v, float) and not np.isfinite(v)) else v

        sizes = sorted(self.curve["n_agents"].unique())
        ends = {}
        for N in (sizes[0], sizes[-1]):
            c = self.curve[(self.curve["n_agents"] == N) & (self.curve["reading"] == "consensus")]
            ends[int(N)] = {r["name"]: [float(r["p"]), float(r["low"]), float(r["high"])] for _, r in c.iterrows()}
        lim = {k: ({kk: fin(float(vv)) for kk, vv in v.items()} if isinstance(v, dict) else
                   (fin(v) if isinstance(v, float) else v)) for k, v in self.limit.items()}
        return {"names": list(self.names), "memory": self.memory, "sizes": [int(n) for n in sizes],
                "p_consensus_ends": ends, "limit": lim, "individual": self.individual, "regime": self.regime,
                "settings": {k: v for k, v in self.settings.items() if k != "sizes"}}

    @plotting
    def plot(self, ax=None, *, reading: str = "consensus", majority: bool = True):
        """P(consensus on each name) against N (log scale), Monte Carlo bands, the majority
        reading of the favoured name (dashed), the individual bias ``p(name | empty)`` (dotted)
        and the mean-field limit (diamonds at the right edge, labelled N -> infinity)."""
        import matplotlib.pyplot as plt

        if reading not in READINGS:
            raise ValueError(f"reading must be one of {READINGS}; got {reading!r}")
        if ax is None:
            _, ax = plt.subplots(figsize=(7.8, 3.8), layout="constrained")
        sizes = np.sort(self.curve["n_agents"].unique()).astype(float)
        x_inf = sizes[-1] * 2.2
        lim_key = "p_consensus" if reading == "consensus" else "p_majority"
        for k, nm in enumerate(list(self.names) + [NONE]):
            c = self.curve[(self.curve["reading"] == reading) & (self.curve["name"] == nm)].sort_values("n_agents")
            if nm == NONE and not (c["p"] > 0).any() and not self.limit[lim_key].get(NONE):
                continue
            col = "0.45" if nm == NONE else f"C{k}"
            lab = "no convergence" if nm == NONE else f"P({reading} on {nm})"
            ax.fill_between(c["n_agents"], c["low"], c["high"], color=col, alpha=0.18, lw=0)
            ax.plot(c["n_agents"], c["p"], "o-", ms=3, color=col, label=lab)
            lim = self.limit[lim_key].get(nm)
            if lim is not None and np.isfinite(lim):
                ax.plot([x_inf], [lim], "D", color=col, ms=7, mec="k", mew=0.6, zorder=4)
            if nm in self.names and nm in self.individual:
                ax.axhline(self.individual[nm]["p"], color=col, ls=":", lw=1)
        if majority and reading == "consensus":
            fav = max(self.names, key=lambda n: self.limit["p_majority"].get(n) or 0.0)
            c = self.curve[(self.curve["reading"] == "majority") & (self.curve["name"] == fav)].sort_values("n_agents")
            k = list(self.names).index(fav)
            ax.plot(c["n_agents"], c["p"], "--", color=f"C{k}", lw=1, label=f"P({fav} holds the majority at the end)")
        ax.set_xscale("log")
        ticks = [t for t in (4, 10, 30, 100, 300, 1000, 3000, 10000) if sizes[0] <= t <= sizes[-1]]
        ax.set_xticks(ticks + [x_inf])
        ax.set_xticklabels([str(t) for t in ticks] + ["∞"])
        verdict = f"interaction {self.regime} the individual bias" if self.regime in ("amplifies", "overrides") else \
            ("interaction creates a collective bias" if self.regime == "creates" else self.regime)
        ax.set(xlabel="population size N", ylabel="probability", ylim=(-0.03, 1.03),
               title=f"H = {self.memory}: {verdict}")
        ax.plot([], [], "D", color="0.5", mec="k", mew=0.6, label="mean field (N → ∞)")
        ax.plot([], [], ":", color="0.5", label="individual bias p(name | empty memory)")
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return ax

    def __repr__(self) -> str:
        sizes = sorted(self.curve["n_agents"].unique())
        fav = max(self.names, key=lambda n: self.limit["p_majority"].get(n) or 0.0)
        p = self.p(fav)
        return (f"GroupSizeCurve(H={self.memory}, N={int(sizes[0])}..{int(sizes[-1])}: P(consensus on {fav}) "
                f"{p.iloc[0]:.2f} -> {p.iloc[-1]:.2f}; mean field: {self.limit['outcome']}, "
                f"P(consensus on {fav}) -> {self.limit['p_consensus'].get(fav, float('nan')):.2f}; "
                f"individual p({fav} | empty) {self.individual[fav]['p']:.3f}; interaction {self.regime})")

    def _repr_html_(self) -> str:
        import html

        t = self.curve[self.curve["reading"] == "consensus"].pivot(index="n_agents", columns="name", values="p")
        return f"<p><code>{html.escape(repr(self))}</code></p>" + t.to_html(float_format=lambda v: f"{v:.3f}")

    @classmethod
    def _contract_example(cls) -> "GroupSizeCurve":
        """Three sizes of ten runs each with :meth:`StrategyMeanField._contract_example` as the limit,
        literal counts (``tests/umbrella/test_contracts.py``)."""
        rows = []
        for N, (a, b) in ((4, (6, 4)), (8, (7, 3)), (16, (9, 1))):
            for reading in READINGS:
                for nm, k in (("A", a), ("B", b), (NONE, 0)):
                    rows.append({"n_agents": N, "reading": reading, "name": nm, "runs": k, "n_runs": 10, "p": k / 10,
                                 "low": max(0.0, k / 10 - 0.3), "high": min(1.0, k / 10 + 0.3)})
        mf = StrategyMeanField._contract_example()
        limit = {"p_majority": dict(mf.p_majority), "p_consensus": dict(mf.p_consensus), "final_share": mf.final_share,
                 "final_success": float(mf.success[-1]), "rounds_to_95": mf.rounds_to_95, "outcome": mf.outcome,
                 "stable": mf.stable}
        return cls(names=("A", "B"), memory=1, curve=pd.DataFrame(rows),
                   speed=pd.DataFrame({"n_agents": [4, 8, 16], "converged": [1.0, 1.0, 0.9],
                                       "rounds_median": [5.0, 7.0, 9.0], "rounds_mean": [5.5, 7.2, 9.4]}),
                   limit=limit, limit_draws=pd.DataFrame([{"draw": -1, "outcome": "A", "consensus": True,
                                                           "share_A": 0.99, "share_B": 0.01, "success": 0.98}]),
                   individual={"A": {"p": 0.5, "low": 0.5, "high": 0.5}, "B": {"p": 0.5, "low": 0.5, "high": 0.5}},
                   regime="creates", mean_field=mf, settings={"n_runs": 10, "max_rounds": 100})


def _read_runs(res, names, N, R):
    """Winner by the 95 % rule, majority at the end and rounds to convergence of each run."""
    W = len(names)
    prod = res.round_production.reshape(res.n_runs, -1, W)  # stop="max": every run has R rounds
    t95 = res.success95_time
    cons, maj, rounds = [], [], []
    for k in range(res.n_runs):
        last = prod[k, -3:].sum(axis=0)
        maj.append(names[int(np.argmax(last))] if last.max() > last.sum() / W else NONE)
        if np.isnan(t95[k]):
            cons.append(NONE)
            rounds.append(np.nan)
            continue
        r = int(t95[k] // N)
        win = prod[k, max(0, r - 2):r + 1].sum(axis=0)
        cons.append(names[int(np.argmax(win))])
        rounds.append((t95[k] + 1) / N)
    return cons, maj, rounds


def _limit_rows(tables, mf_kwargs):
    rows = []
    for d, t in enumerate(tables):
        mf = strategy_mean_field(t, **mf_kwargs)
        rows.append({"draw": d, "outcome": mf.outcome, "consensus": mf.consensus,
                     **{f"share_{nm}": float(v) for nm, v in zip(t.names, mf.share[-1])},
                     "success": float(mf.success[-1]), "rounds_to_95": mf.rounds_to_95,
                     "p_majority": mf.p_majority, "p_consensus": mf.p_consensus})
    return rows


def group_size_curve(strategy, *, sizes=DEFAULT_SIZES, n_runs: int = 100, max_rounds: int = 100,
                     n_draws: int | None = None, regime_tol: float = 0.01, mean_field_kwargs: dict | None = None,
                     progress: bool = False, rng=None) -> GroupSizeCurve:
    """Predict P(consensus on each name) for populations of ``sizes`` agents, and the N -> infinity limit.

    Parameters
    ----------
    strategy : StrategyTable or StrategyFit
        One table, or a fit: its posterior-mean table, or ``n_draws`` posterior draws.
    sizes : sequence of int, optional
        Population sizes (each >= 2).
    n_runs : int, optional
        Runs per size (spread evenly over the draws when ``n_draws`` is given).
    max_rounds : int, optional
        Population rounds per run.
    n_draws : int, optional
        Posterior draws of a fit (None: its mean table). The curve pools the runs of all draws
        (posterior predictive); the limit is the fraction of draws whose mean field settles on
        each name.
    regime_tol : float, optional
        For a single table: how far ``p(name | empty)`` must be from ``1/W`` to count as an
        individual bias. For a fit the individual bias is read from 400 posterior draws of the
        empty-memory row: a bias when its 95 % interval excludes ``1/W``.
    mean_field_kwargs : dict, optional
        Passed to :func:`normlab.theory.memory_mean_field.strategy_mean_field`.
    progress : bool, optional
        A progress bar over sizes.
    rng : optional

    Returns
    -------
    GroupSizeCurve

    Raises
    ------
    ValueError, TypeError
        Bad sizes, runs or strategy (before any simulation).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods (95 % rule),
    Fig. 2; Flint Ashery, Aiello, Pastor-Satorras & Baronchelli, arXiv:2510.22422.

    Examples
    --------
    >>> from normlab.calibration import load_fit
    >>> gs = group_size_curve(load_fit("llama3_70b_QM_H3"), sizes=(4, 24, 200), n_runs=50, rng=1)  # doctest: +SKIP
    >>> gs.plot()  # doctest: +SKIP
    """
    sz, R, T = _check_settings(sizes, n_runs, max_rounds, regime_tol)
    tables = _strategy_tables(strategy, n_draws, rng)
    names, H = tuple(tables[0].names), tables[0].memory
    D = len(tables)
    per = [R // D + (1 if d < R % D else 0) for d in range(D)]
    seeds = spawn(rng, 3)
    curve, speed = _size_curve(tables, per, sz, T, seeds[0], progress)
    mf, limit, limit_draws = _limit(tables, dict(mean_field_kwargs or {}))
    individual, regime = _regime(strategy, tables, limit["p_majority"], regime_tol, seeds[1])
    settings = dict(sizes=list(sz), n_runs=R, max_rounds=T, n_draws=n_draws, runs_per_draw=per,
                    regime_tol=float(regime_tol), consensus_rule="95% of the last 3N interactions successful",
                    majority_rule="name produced most over the last 3 rounds")
    return GroupSizeCurve(names=names, memory=H, curve=curve, speed=speed, limit=limit,
                          limit_draws=limit_draws, individual=individual, regime=regime, mean_field=mf,
                          settings=settings)


def _check_settings(sizes, n_runs, max_rounds, regime_tol):
    """Validated ``(sizes, runs, rounds)`` of :func:`group_size_curve` (before any simulation)."""
    try:
        sz = sorted({check_int(int(n) if isinstance(n, np.integer) else n, "sizes", low=2) for n in sizes})
    except TypeError as exc:
        raise TypeError(f"sizes must be integers >= 2; {exc}") from None
    if not sz:
        raise ValueError("sizes must hold at least one population size")
    R = check_int(n_runs, "n_runs", low=1)
    T = check_int(max_rounds, "max_rounds", low=3)
    if not 0 <= float(regime_tol) < 0.5:
        raise ValueError(f"regime_tol must be in [0, 0.5); got {regime_tol!r}")
    return sz, R, T


def _strategy_tables(strategy, n_draws, rng) -> list:
    """The tables played: a fit's mean table or ``n_draws`` posterior draws, or the one table."""
    if isinstance(strategy, StrategyFit):
        if n_draws is None:
            return [strategy.mean_table()]
        D = check_int(n_draws, "n_draws", low=1)
        return table_draws(strategy, D, rng=spawn(rng, 3)[2])
    if isinstance(strategy, StrategyTable):
        if n_draws is not None:
            raise ValueError("n_draws needs a StrategyFit (a single table has no posterior)")
        return [strategy]
    raise TypeError(f"strategy must be a StrategyTable or a StrategyFit; got {type(strategy).__name__}")


def _size_curve(tables, per, sizes, T, seed, progress):
    """P(consensus / majority on each name) with Clopper-Pearson intervals and the speed, per size
    (``per[d]`` runs of table ``d``)."""
    names, H = tuple(tables[0].names), tables[0].memory
    D = len(tables)
    size_seeds = spawn(seed, len(sizes))
    rows, speed = [], []
    it = sizes
    if progress:
        from normlab._display import tqdm

        it = tqdm(sizes, desc="group sizes")
    for N, s in zip(it, size_seeds):
        cons, maj, rounds = [], [], []
        for d, (t, r, ds) in enumerate(zip(tables, per, spawn(s, D))):
            if r == 0:
                continue
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*reached max_interactions.*", category=RuntimeWarning)
                res = strategy_game(t, n_agents=N, memory=H, n_runs=r, stop="max", max_interactions=T * N,
                                    progress=False, rng=ds)
            c, m, rd = _read_runs(res, names, N, T)
            cons += c
            maj += m
            rounds += rd
        n = len(cons)
        for reading, vals in (("consensus", cons), ("majority", maj)):
            for nm in list(names) + [NONE]:
                k = sum(v == nm for v in vals)
                lo, hi = clopper_pearson(k, n)
                rows.append({"n_agents": N, "reading": reading, "name": nm, "runs": k, "n_runs": n, "p": k / n,
                             "low": float(lo), "high": float(hi)})
        rr = np.asarray(rounds, float)
        ok = ~np.isnan(rr)
        speed.append({"n_agents": N, "converged": float(ok.mean()),
                      "rounds_median": float(np.median(rr[ok])) if ok.any() else np.nan,
                      "rounds_mean": float(rr[ok].mean()) if ok.any() else np.nan})
    return pd.DataFrame(rows), pd.DataFrame(speed)


def _limit(tables, mk):
    """The limit N -> infinity: the mean field of the (mean) table, and per draw when there are
    several: ``(mean_field, limit dict, limit_draws frame)``."""
    names, H = tuple(tables[0].names), tables[0].memory
    D = len(tables)
    base = tables[0] if D == 1 else StrategyTable(np.mean([t.table for t in tables], axis=0), memory=H, names=names)
    mf = strategy_mean_field(base, **mk)
    if D == 1:
        lim_rows = [{"draw": -1, "outcome": mf.outcome, "consensus": mf.consensus,
                     **{f"share_{nm}": float(v) for nm, v in zip(names, mf.share[-1])},
                     "success": float(mf.success[-1]), "rounds_to_95": mf.rounds_to_95,
                     "p_majority": mf.p_majority, "p_consensus": mf.p_consensus}]
    else:
        mk.setdefault("steps_per_round", 4)  # fixed points only: a coarser step converges faster
        lim_rows = _limit_rows(tables, mk)
    cats = list(names) + [NONE]
    p_maj = {c: float(np.mean([r["p_majority"][c] for r in lim_rows])) for c in cats}
    p_con = {c: float(np.mean([r["p_consensus"][c] for r in lim_rows])) for c in cats}
    limit = {"p_majority": p_maj, "p_consensus": p_con, "outcome": mf.outcome, "stable": mf.stable,
             "final_share": mf.final_share, "final_success": float(mf.success[-1]),
             "rounds_to_95": mf.rounds_to_95, "draws": D}
    limit_draws = pd.DataFrame([{k: v for k, v in r.items() if k not in ("p_majority", "p_consensus")}
                                for r in lim_rows])
    return mf, limit, limit_draws


def _regime(strategy, tables, p_maj, regime_tol, seed):
    """Individual bias (``p(name | empty memory)``, over the posterior when there is one) and the
    regime: whether interaction amplifies, creates or overrides it."""
    names, W = tuple(tables[0].names), tables[0].n_names
    if isinstance(strategy, StrategyFit):
        first = strategy.sample_tables(400, rng=seed)[:, 0, :]
    else:
        first = np.array([t.table[0] for t in tables])
    individual = {nm: {"p": float(first[:, k].mean()), "low": float(np.quantile(first[:, k], 0.025)),
                       "high": float(np.quantile(first[:, k], 0.975))} for k, nm in enumerate(names)}
    fav = max(names, key=lambda n: p_maj[n])
    if any(np.isnan(v) for v in p_maj.values()):
        regime = "undetermined"
    elif p_maj[fav] <= 1.0 / W + 1e-9:
        regime = "no collective bias"
    else:
        ind = individual[fav]
        lo, hi = (ind["p"] - regime_tol, ind["p"] + regime_tol) if first.shape[0] == 1 else (ind["low"], ind["high"])
        if lo > 1.0 / W:
            regime = "amplifies"
        elif hi < 1.0 / W:
            regime = "overrides"
        else:
            regime = "creates"
    return individual, regime


def main(argv=None) -> int:
    """``python -m normlab.calibration.prediction.group_size``: the group-size curves of the shipped fits."""
    import argparse
    import time

    ap = argparse.ArgumentParser(description="P(consensus on each name) against N, and the mean-field limit, for "
                                             "the shipped Llama-3 / Llama-3.1 fits (posterior-mean tables).")
    ap.add_argument("--runs", type=int, default=200, help="runs per population size (default 200)")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="comma-separated sizes")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    t0 = time.perf_counter()
    print(f"P(consensus on M) by the 95% rule ({args.runs} runs per size, 100 rounds, seed {args.seed}); "
          "mean field: N -> infinity")
    for label, name in (("Llama-3 H=3", "llama3_70b_QM_H3"), ("Llama-3 H=5", "llama3_70b_QM_H5"),
                        ("Llama-3.1 H=5", "llama31_70b_QM_H5")):
        gs = group_size_curve(load_fit(name), sizes=sizes, n_runs=args.runs, rng=args.seed)
        p = gs.p("M")
        lim = gs.limit
        pts = ", ".join(f"N={int(n)}: {v:.2f}" for n, v in p.items())
        ind = gs.individual["M"]
        verdict = {"amplifies": "interaction amplifies the individual bias",
                   "overrides": "interaction overrides the individual bias",
                   "creates": "interaction creates a collective bias"}.get(gs.regime, gs.regime)
        print(f"{label}: p(M | empty memory) {ind['p']:.3f} [{ind['low']:.3f}, {ind['high']:.3f}]; {pts}; "
              f"mean field: settles on {lim['outcome']} (share of M {lim['final_share']['M']:.3f}, success "
              f"{lim['final_success']:.3f}), P(consensus on M) -> {lim['p_consensus']['M']:.2f}; {verdict}")
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
