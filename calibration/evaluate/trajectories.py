"""LLM vs theory: population trajectories with uncertainty bands, distances, and figures.

Trajectories are per population round (round ``r`` covers interactions ``(r - 1) N .. r N - 1``,
from 1): the success rate and the production probability of each name among uncommitted agents
(Flint Ashery et al. 2025, Fig. 1A, Fig. 3A, Fig. S6). A run that stopped in a consensus keeps contributing after
its stop -- success 1 and production 1 of its consensus name, as in the published figures; a run
that stopped without a consensus (a cap) stops contributing.

- :func:`llm_trajectories` -- mean curves of logged runs with bootstrap bands (runs resampled).
- :func:`theory_trajectories` -- posterior predictive curves of a fitted strategy (bands over
  posterior draws of the table, each simulated with several runs).
- :func:`compare_trajectories` -- both, plus distances: integrated absolute difference (sum over
  rounds of ``|LLM - theory|``, in rounds), mean and maximum absolute difference, and the rounds at
  which each mean success curve first reaches 0.95.
- Figures (seaborn/matplotlib): :func:`plot_strategy_heatmap` (Fig. S8), :func:`plot_asymmetry`
  (Table 1), :func:`plot_flip_curves` (Fig. 3B, predicted vs observed),
  :func:`plot_trajectories` (Fig. 1A / 3A).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1, 3, S6,
S8, S9; Table 1; Table S3.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, legend_outside, plain, plotting, short_repr, error_bars
from normlab._rng import as_generator, spawn
from normlab.schema import GameLog
from normlab.theory import strategy_game

from ..fit.posterior import StrategyFit
from ..prediction.readings import _numba_threads, _winners, table_draws

__all__ = [
    "llm_trajectories",
    "theory_trajectories",
    "compare_trajectories",
    "TrajectoryComparison",
    "plot_strategy_heatmap",
    "plot_asymmetry",
    "plot_flip_curves",
    "plot_trajectories",
    "plot_success_prediction",
]


def _band(mat, level, n_boot, g):
    """Mean over rows (NaN-aware) and a bootstrap band over rows."""
    with np.errstate(invalid="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(mat, axis=0)
            if n_boot and mat.shape[0] > 1:
                idx = g.integers(0, mat.shape[0], size=(n_boot, mat.shape[0]))
                boots = np.nanmean(mat[idx], axis=1)
                a = (1 - level) / 2
                lo, hi = np.nanquantile(boots, [a, 1 - a], axis=0)
            else:
                lo = hi = np.full(mat.shape[1], np.nan)
    return mean, lo, hi


def _long(rounds, blocks):
    rows = []
    for (quantity, name), (mean, lo, hi, n) in blocks.items():
        rows.append(pd.DataFrame({"round": rounds, "quantity": quantity, "name": name, "mean": mean,
                                  "low": lo, "high": hi, "n_runs": n}))
    return pd.concat(rows, ignore_index=True)


def llm_trajectories(log: GameLog, *, n_rounds: int | None = None, n_boot: int = 1000, level: float = 0.95,
                     rng=None) -> pd.DataFrame:
    """Mean success rate and production probabilities per round of logged runs, with bootstrap bands.

    Parameters
    ----------
    log : normlab.schema.GameLog
        Runs of one setting (same N and pool).
    n_rounds : int, optional
        Rounds to report (default: the longest run).
    n_boot : int, optional
        Bootstrap replicates (runs resampled with replacement); 0 for no band.
    level : float, optional
    rng : optional

    Returns
    -------
    pandas.DataFrame
        Long format: ``round``, ``quantity`` (``success_rate`` or ``production``), ``name``
        (``""`` for the success rate), ``mean``, ``low``, ``high``, ``n_runs`` (runs contributing).
    """
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    if log.runs.empty or log.decisions.empty:
        raise ValueError("the log holds no run")
    Ns = log.runs["n_agents"].unique()
    if len(Ns) != 1:
        raise ValueError(f"runs have different population sizes {sorted(Ns)}; select one")
    N = int(Ns[0])
    pools = {frozenset(str(s).split(",")) for s in log.runs["names"]}
    if len(pools) != 1:
        raise ValueError("runs use different name pools; select one")
    names = sorted(next(iter(pools)))
    d = log.decisions
    inter = d.drop_duplicates(["run", "t"])
    runs = log.runs["run"].to_numpy()
    rpos = {r: i for i, r in enumerate(runs)}
    R = int(-(-log.runs["n_interactions"].max() // N)) if n_rounds is None else int(n_rounds)
    succ = np.full((len(runs), R), np.nan)
    prod = {nm: np.full((len(runs), R), np.nan) for nm in names}
    s = inter.groupby(["run", "round"])["success"].mean()
    for (r, rd), v in s.items():
        if rd < R:
            succ[rpos[r], rd] = v
    u = d[d["valid"].to_numpy() & ~d["committed"].to_numpy()]
    cnt = u.groupby(["run", "round", "name"]).size()
    tot = u.groupby(["run", "round"]).size()
    for (r, rd), t in tot.items():
        if rd < R:
            for nm in names:
                prod[nm][rpos[r], rd] = cnt.get((r, rd, nm), 0) / t
    # pad runs that stopped in a consensus
    for i, row in enumerate(log.runs.itertuples()):
        last = int(-(-row.n_interactions // N))
        cons = row.consensus
        if cons is not None and not (isinstance(cons, float)) and last < R:
            succ[i, last:] = 1.0
            for nm in names:
                prod[nm][i, last:] = 1.0 if nm == cons else 0.0
    g = as_generator(rng)
    blocks = {("success_rate", ""): (*_band(succ, level, n_boot, g), np.sum(~np.isnan(succ), axis=0))}
    for nm in names:
        blocks[("production", nm)] = (*_band(prod[nm], level, n_boot, g), np.sum(~np.isnan(prod[nm]), axis=0))
    return _long(np.arange(1, R + 1), blocks)


def theory_trajectories(fit, *, n_agents: int, n_rounds: int, n_draws: int = 100, n_runs: int = 10,
                        committed: int = 0, committed_name=None, initial=None, stop: str | None = None,
                        level: float = 0.95, rng=None) -> pd.DataFrame:
    """Posterior predictive trajectories of a fitted strategy.

    Parameters
    ----------
    fit : StrategyFit, StrategyTable or list of StrategyTable
    n_agents, n_rounds : int
        Population size and rounds simulated.
    n_draws, n_runs : int, optional
        Posterior draws, and runs per draw (the curve of a draw is the mean of its runs).
    committed, committed_name, initial :
        As for :func:`normlab.theory.strategy_game` (e.g. ``initial="consensus:M"``,
        ``committed=4``, ``committed_name="Q"`` for a committed-minority experiment).
    stop : str, optional
        Default ``"streak"`` from empty memories (as the published convergence runs) and
        ``"max"`` otherwise.
    level : float, optional
    rng : optional

    Returns
    -------
    pandas.DataFrame
        As :func:`llm_trajectories`; ``mean`` is the mean over draws, ``low``/``high`` the
        equal-tailed interval of the per-draw mean curves; ``n_runs`` = draws.
    """
    seeds = spawn(rng, 2)
    tables = table_draws(fit, n_draws, rng=seeds[0])
    names = tuple(tables[0].names)
    H = tables[0].memory
    if stop is None:
        stop = "streak" if initial in (None, "empty") else "max"
    S = np.full((n_draws, n_rounds), np.nan)
    P = {nm: np.full((n_draws, n_rounds), np.nan) for nm in names}
    with _numba_threads(1), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*reached max_interactions.*", category=RuntimeWarning)
        for i, (t, s) in enumerate(zip(tables, spawn(seeds[1], n_draws))):
            r = strategy_game(t, n_agents=n_agents, memory=H, n_runs=n_runs, committed=committed,
                              committed_name=committed_name, initial=initial, stop=stop,
                              max_interactions=n_rounds * n_agents, progress=False, rng=s)
            m = r.success_matrix(n_rounds)
            stopped = r.stop_reason == stop
            if stop == "streak":
                m[stopped] = np.where(np.isnan(m[stopped]), 1.0, m[stopped])
            S[i] = np.nanmean(m, axis=0)
            ps = r.production_share(n_rounds=n_rounds)
            if stop == "streak":
                win = _winners(r, names)
                for k in np.flatnonzero(stopped):
                    last = r.round_offsets[k + 1] - r.round_offsets[k]
                    sel = (ps["run"] == k) & (ps["round"] > last)
                    ps.loc[sel, "share"] = (ps.loc[sel, "name"] == win[k]).astype(float)
            piv = ps.pivot_table(index="round", columns="name", values="share", aggfunc="mean")
            for nm in names:
                P[nm][i, : len(piv)] = piv[nm].to_numpy()[:n_rounds]
    a = (1 - level) / 2
    blocks = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for key, M in [(("success_rate", ""), S)] + [(("production", nm), P[nm]) for nm in names]:
            blocks[key] = (np.nanmean(M, axis=0), np.nanquantile(M, a, axis=0), np.nanquantile(M, 1 - a, axis=0),
                           np.sum(~np.isnan(M), axis=0))
    return _long(np.arange(1, n_rounds + 1), blocks)


def _first95(curve):
    hit = np.flatnonzero(np.asarray(curve) >= 0.95 - 1e-9)
    return float(hit[0] + 1) if hit.size else float("nan")


@dataclass(frozen=True)
class TrajectoryComparison:
    """LLM and theory trajectories side by side, with distances.

    Attributes
    ----------
    curves : pandas.DataFrame
        ``source`` (``"llm"``/``"theory"``), ``round``, ``quantity``, ``name``, ``mean``, ``low``,
        ``high``, ``n_runs``.
    distances : pandas.DataFrame
        One row per (quantity, name): ``iad`` (sum over common rounds of ``|LLM - theory|``),
        ``mean_abs``, ``max_abs``, ``rounds`` (common rounds compared), ``frac_in_band`` (share
        of rounds where the LLM mean lies in the theory band), and for the success rate
        ``llm_rounds_to_95``, ``theory_rounds_to_95``.
    label : str
    """

    curves: pd.DataFrame
    distances: pd.DataFrame
    label: str = ""
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        return self.curves.copy()

    def summary(self) -> dict:
        """Distances per (quantity, name) as plain Python values."""
        out = {}
        for _, r in self.distances.iterrows():
            key = r["quantity"] + (f" {r['name']}" if r["name"] else "")
            out[key] = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()
                        if k not in ("quantity", "name")}
        return plain({"label": self.label, "distances": out})

    def __repr__(self) -> str:
        parts = []
        for _, r in self.distances.iterrows():
            q = r["quantity"] + (f" {r['name']}" if r["name"] else "")
            parts.append(f"{q}: mean |LLM - theory| {r['mean_abs']:.3f} over {int(r['rounds'])} rounds, "
                         f"{r['frac_in_band']:.0%} inside the theory band")
        return short_repr("TrajectoryComparison", self.label or None, *parts)

    def _repr_html_(self) -> str:
        rows = []
        for _, r in self.distances.iterrows():
            q = r["quantity"].replace("_", " ") + (f" of {r['name']}" if r["name"] else "")
            rows += [(f"{q}: mean |LLM - theory|", r["mean_abs"], None, f"over {int(r['rounds'])} rounds"),
                     (f"{q}: max |LLM - theory|", r["max_abs"]),
                     (f"{q}: rounds with the LLM mean inside the theory band", r["frac_in_band"])]
            if r["quantity"] == "success_rate":
                rows.append(("rounds to 95% success, LLM / theory",
                             f"{fmt(r.get('llm_rounds_to_95'))} / {fmt(r.get('theory_rounds_to_95'))}"))
        return html_card("TrajectoryComparison", rows, level=None, subtitle=self.label,
                         note=".plot(quantity=..., name=...) draws both curves with their bands; "
                              ".distances and .to_frame() give the tables.")

    @plotting
    def plot(self, quantity: str = "success_rate", *, name: str = "", ax=None):
        """LLM and theory curves with their bands (:func:`plot_trajectories`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        return plot_trajectories(self, quantity=quantity, name=name, ax=ax)

    @classmethod
    def _contract_example(cls) -> "TrajectoryComparison":
        """:func:`compare_trajectories` of literal LLM and theory success curves over five rounds
        (``tests/umbrella/test_contracts.py``)."""
        def curve(means, width):
            return pd.DataFrame({"round": np.arange(1, 6), "quantity": "success_rate", "name": "", "mean": means,
                                 "low": np.clip(np.asarray(means) - width, 0, 1), "high": np.clip(np.asarray(means) + width, 0, 1),
                                 "n_runs": 10})

        return compare_trajectories(curve([0.5, 0.7, 0.85, 0.96, 1.0], 0.1), curve([0.5, 0.72, 0.88, 0.95, 0.99], 0.08),
                                    label="toy LLM vs theory")


def compare_trajectories(llm: pd.DataFrame, theory: pd.DataFrame, *, label: str = "") -> TrajectoryComparison:
    """Distances between LLM and theory curves (outputs of :func:`llm_trajectories` and
    :func:`theory_trajectories`) over their common rounds.

    Returns
    -------
    TrajectoryComparison
    """
    for nm, f in (("llm", llm), ("theory", theory)):
        if not isinstance(f, pd.DataFrame):
            make = "llm_trajectories(log)" if nm == "llm" else "theory_trajectories(fit, n_agents=..., n_rounds=...)"
            raise TypeError(f"{nm} must be the curves DataFrame of {make}; got {type(f).__name__}")
        miss = {"round", "quantity", "name", "mean", "low", "high"} - set(f.columns)
        if miss:
            raise ValueError(f"{nm} curves are missing columns {sorted(miss)}")
    rows = []
    for (q, nm), a in llm.groupby(["quantity", "name"], sort=False):
        b = theory[(theory["quantity"] == q) & (theory["name"] == nm)]
        m = a.merge(b, on="round", suffixes=("_llm", "_th")).dropna(subset=["mean_llm", "mean_th"])
        if m.empty:
            continue
        diff = np.abs(m["mean_llm"] - m["mean_th"])
        row = {"quantity": q, "name": nm, "iad": float(diff.sum()), "mean_abs": float(diff.mean()),
               "max_abs": float(diff.max()), "rounds": int(len(m)),
               "frac_in_band": float(np.mean((m["mean_llm"] >= m["low_th"] - 1e-12) & (m["mean_llm"] <= m["high_th"] + 1e-12)))}
        if q == "success_rate":
            row["llm_rounds_to_95"] = _first95(a.sort_values("round")["mean"])
            row["theory_rounds_to_95"] = _first95(b.sort_values("round")["mean"])
        rows.append(row)
    curves = pd.concat([llm.assign(source="llm"), theory.assign(source="theory")], ignore_index=True)
    return TrajectoryComparison(curves=curves, distances=pd.DataFrame(rows), label=label)


# ----------------------------------------------------------------------------- figures
def _ax(ax, figsize=(5, 4)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


@plotting
def plot_strategy_heatmap(fit, *, name: str | None = None, memory_len: int | None = None, ax=None, cmap="viridis",
                          annotate_unseen: bool = True):
    """Fig. S8-style heatmap: p(name | memory) over own (rows) and partner (columns) histories.

    Parameters
    ----------
    fit : StrategyFit or normlab.theory.strategies.StrategyTable
        Posterior mean is shown for a fit; unseen states (no training decision) are crossed.
    name : str, optional
        The name whose probability is coloured (default: the last name, e.g. ``M``).
    memory_len : int, optional
        Memory length shown (default: full memory ``H``). Only two-name pools.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    if isinstance(fit, StrategyFit):
        table, unseen = fit.mean_table(), (~fit.observed if annotate_unseen else None)
    else:
        table, unseen = fit, None
    return table.plot(name=name, memory_len=memory_len, unseen=unseen, ax=ax, cmap=cmap)


@plotting
def plot_asymmetry(result, *, ax=None, min_n: int = 1, posterior: bool = False):
    """Table 1 as a scatter: ``p(a | s)`` against ``p(b | relabel(s))`` for every observed pair.

    Points on the diagonal are relabelling-symmetric; above it the pair favours ``a``. Marker
    size grows with the visits; error bars are Wilson-type 95% intervals of each frequency (or
    the posterior intervals with ``posterior=True``).

    Parameters
    ----------
    result : AsymmetryResult
    ax : matplotlib Axes, optional
    min_n : int, optional
        Only pairs with at least ``min_n`` decisions on each side.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import seaborn as sns

    p = result.pairs
    p = p[(p["n"] >= min_n) & (p["n_mirror"] >= min_n)].copy()
    ax = _ax(ax, (5, 5))
    p["memory length"] = p["memory_len"].astype(str)
    sns.scatterplot(data=p, x="p_b_mirror", y="p_a", hue="memory length", size="visits", sizes=(10, 200), ax=ax,
                    alpha=0.8)
    ax.plot([0, 1], [0, 1], color="0.4", lw=1, ls="--")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_xlabel(f"p({result.b} | relabelled state)")
    ax.set_ylabel(f"p({result.a} | state)")
    s = result.summary
    ax.set_title(f"bias towards {result.a}: {s['bias_visits']:+.3f} (visit-weighted); CMH p = {s['p_cmh']:.2g}",
                 fontsize=9)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    return ax


@plotting
def plot_flip_curves(prediction=None, empirical=None, *, majority: str, n_agents: int | None = None,
                     memory: int | None = None, ax=None, label: str = ""):
    """Flip probability vs committed count: predicted band and observed runs (Fig. 3B analogue).

    Parameters
    ----------
    prediction : Prediction, optional
    empirical : EmpiricalCriticalMass, optional
    majority : str
        The consensus attacked.
    n_agents, memory : int, optional
        Select the empirical direction.

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = _ax(ax)
    if prediction is not None:
        fc = prediction.flip_curve()
        fc = fc[fc["majority"] == majority]
        ax.fill_between(fc["committed"], fc["low"], fc["high"], alpha=0.25, color="C0", step=None)
        ax.plot(fc["committed"], fc["p_flip"], "-", color="C0", label="predicted (posterior predictive)")
    if empirical is not None:
        cv = empirical.curves[empirical.curves["majority"] == majority]
        if n_agents is not None:
            cv = cv[cv["n_agents"] == n_agents]
        if memory is not None:
            cv = cv[cv["memory"] == memory]
        if not cv.empty:
            ax.errorbar(cv["committed"], cv["p_flip"], yerr=error_bars(cv["p_flip"], cv["ci_low"], cv["ci_high"]),
                        fmt="o", color="C3", capsize=3, label="LLM runs (Clopper-Pearson 95%)")
            est = empirical.estimates[(empirical.estimates["majority"] == majority)]
            if n_agents is not None:
                est = est[est["n_agents"] == n_agents]
            if memory is not None:
                est = est[est["memory"] == memory]
            if len(est) == 1 and est.iloc[0]["b1"] > 0:
                e = est.iloc[0]
                xs = np.linspace(0, max(cv["committed"].max(), 1), 200)
                ax.plot(xs, 1 / (1 + np.exp(-(e["b0"] + e["b1"] * xs))), ":", color="C3", label="logistic fit (Firth)")
    ax.axhline(0.5, color="0.6", lw=0.8)
    ax.set_xlabel("committed agents")
    ax.set_ylabel("P(flip within window)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(label or f"overturning a consensus on {majority}", fontsize=10)
    ax.legend(fontsize=7)
    return ax


@plotting
def plot_trajectories(comparison: TrajectoryComparison, *, quantity: str = "success_rate", name: str = "", ax=None):
    """LLM vs theory curve with bands (Fig. 1A / Fig. 3A analogue).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = _ax(ax)
    c = comparison.curves
    c = c[(c["quantity"] == quantity) & (c["name"] == name)]
    for src, col in (("theory", "C0"), ("llm", "C3")):
        s = c[c["source"] == src].sort_values("round")
        ax.fill_between(s["round"], s["low"], s["high"], color=col, alpha=0.2)
        ax.plot(s["round"], s["mean"], color=col, label="LLM runs" if src == "llm" else "fitted strategy (theory)")
    ax.set_xlabel("population round")
    ax.xaxis.get_major_locator().set_params(integer=True)  # rounds are whole numbers
    ax.set_ylabel(quantity.replace("_", " ") + (f" of {name}" if name else ""))
    ax.set_title(comparison.label, fontsize=10)
    legend_outside(ax, "below")
    return ax


@plotting
def plot_success_prediction(prediction, llm_curve: pd.Series | None = None, *, ax=None, label: str = ""):
    """Predicted mean success curve (band over draws) with an observed curve on top.

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = _ax(ax)
    sc = prediction.success_curve()
    ax.fill_between(sc["round"], sc["low"], sc["high"], alpha=0.25, color="C0")
    ax.plot(sc["round"], sc["mean"], color="C0", label="predicted")
    if llm_curve is not None:
        ax.plot(llm_curve.index, llm_curve.to_numpy(), "o-", ms=3, color="C3", label="LLM runs")
    ax.axhline(0.95, color="0.6", lw=0.8)
    ax.set_xlabel("population round")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("success rate")
    ax.set_title(label, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")  # success curves rise from the lower left
    return ax
