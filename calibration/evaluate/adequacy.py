"""Model adequacy: the fitted table played under the exact design of the committed runs, against the LLM.

A critical mass predicted from a fitted strategy table can miss for three different reasons: the
table is wrong in the states the experiment visits, the runs of the LLM differ from each other
more than the model's runs do, or the experiment's design (a few ragged runs per count, a
knife-edge ensemble rule) makes the published number noisy. :func:`check_adequacy` separates them
with a posterior predictive check: for every posterior draw of the table it simulates *the
experiment that was run* -- the tested committed counts, the runs per count, the protocol's cap and
stop rule and the rule's window, read from the log by :class:`~normlab.calibration.ExperimentDesign`
(never a run's own length: a run stopped on an outcome would hand its outcome to the simulation) -- and
compares, count by count, statistics of the challenger-share trajectories with the LLM's:

``tipped``
    Share of the runs whose final challenger share (mean of its last three complete rounds, within
    the window) is at least 1/2: does the theory tip as often as the LLM?
``final_mean``
    Mean final challenger share over the runs.
``final_sd``
    Standard deviation of the final share between the runs (between-run heterogeneity).
``tipped_level``
    Mean final share of the runs that tipped: how cleanly a flipped population sits at the
    challenger (the residual use of the old name that the published rule's 95 % threshold reads).
``last3``
    The published rule's statistic: the last three rounds of the runs' mean share summed (2.849 or
    more passes; Flint Ashery et al. 2025, Table S3).

Each gets a predictive p-value (two-sided, ``(1 + #more extreme) / (1 + draws)``) and a z score
against the simulated distribution; per statistic and direction a global statistic sums the
squared z scores over counts and is referred to the same sum computed for every simulated
experiment. The fit decides what is in or out of sample: a fit on the baselines (the shipped
tables, ``calibrate``'s default) never saw a committed run; ``fit_on="all"`` did.
:func:`pair_agreement` checks the other assumption of the theory -- that the two agents of an
interaction choose independently given their memories -- against the partners' agreement, and
estimates the first-listed bias of the prompts' name order that a shared order would need to
explain the excess (:mod:`normlab.theory.name_order`).

Unlike :mod:`normlab.calibration.evaluate.trajectories` (mean curves of convergence runs with bootstrap bands),
this module reproduces a committed-minority experiment run by run and tests it.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3,
Methods ("Committed minorities"), the authors' ``simulation_module.py`` (``population``,
``committed``) and ``plotter.ipynb`` cells 9-10; A. Gelman, X.-L. Meng, H. Stern, Statistica
Sinica 6, 733 (1996) (posterior predictive p-values).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from normlab._display import (fmt, html_card, load_result, new_axes, new_figure, plain, plotting, save_result,
                              short_repr)
from normlab._validate import check_int
from normlab.schema import GameLog
from normlab.theory.criteria import FLIP_SUM, published_rule
from normlab.theory.name_order import pair_agreement_probability

from ..fit.inputs import _check_names, _state_index_map, counts_from_log, select_runs
from ..fit.posterior import StrategyFit
from ..fit.registry import fit_strategy
from ..prediction.api import predict
from ..prediction.experiment import ExperimentDesign, committed_runs, experiment_designs
from .observed_critical_mass import challenger_shares

__all__ = ["Adequacy", "check_adequacy", "ADEQUACY_STATISTICS", "PairAgreement", "pair_agreement"]

#: The per-count statistics of :func:`check_adequacy` (see the module docstring).
ADEQUACY_STATISTICS = ("tipped", "final_mean", "final_sd", "tipped_level", "last3")

#: Rounds at the end of a run that make its final share.
FINAL_ROUNDS = 3


def _final_shares(shares: np.ndarray, n_complete: int, window: int) -> float:
    """Mean share over the last three complete rounds within the window (NaN rounds skipped)."""
    R = min(int(n_complete), int(window), len(shares))
    if R < 1:
        return float("nan")
    x = shares[max(0, R - FINAL_ROUNDS):R]
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else float("nan")


def _count_stats(finals: np.ndarray, last3: float) -> dict:
    """The statistics of one count from its runs' final shares and the published rule's sum."""
    f = finals[~np.isnan(finals)]
    tip = f >= 0.5
    return {"tipped": float(tip.mean()) if f.size else np.nan,
            "final_mean": float(f.mean()) if f.size else np.nan,
            "final_sd": float(f.std(ddof=1)) if f.size > 1 else np.nan,
            "tipped_level": float(f[tip].mean()) if tip.any() else np.nan,
            "last3": float(last3)}


def _p_two_sided(sim: np.ndarray, obs: float) -> float:
    s = sim[~np.isnan(sim)]
    if not s.size or np.isnan(obs):
        return float("nan")
    hi = (1 + np.sum(s >= obs - 1e-12)) / (1 + s.size)
    lo = (1 + np.sum(s <= obs + 1e-12)) / (1 + s.size)
    return float(min(1.0, 2 * min(hi, lo)))


@dataclass(frozen=True)
class Adequacy:
    """A posterior predictive check of a fitted table on the design of the committed runs.

    Attributes
    ----------
    checks : pandas.DataFrame
        One row per direction, tested count and statistic (:data:`ADEQUACY_STATISTICS`):
        ``direction``, ``committed``, ``runs``, ``statistic``, ``observed``, ``sim_mean``, ``sim_sd``,
        ``sim_low``, ``sim_high`` (the ``level`` interval over simulated experiments), ``z``,
        ``p_value`` (two-sided predictive).
    overall : pandas.DataFrame
        Per direction (and ``"all"``) and statistic: ``T`` (sum over counts of z squared),
        ``counts`` (counts entering it), ``p_value`` (share of simulated experiments with a larger
        sum).
    trajectories : pandas.DataFrame
        For the figure: ``source`` (``"llm"`` one row per run and round; ``"sim_runs"`` /
        ``"sim_mean"`` the ``level`` band and median of single simulated runs / of the runs' mean),
        ``direction``, ``committed``, ``run``, ``round``, ``share``, ``low``, ``high``.
    draws : pandas.DataFrame
        The simulated statistics per draw (``draw``, ``direction``, ``committed``, statistics).
    level : float
    settings : dict
        The fit (kind, ``fit_on``), draws, run effects, order bias, designs, window.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3; Gelman,
    Meng & Stern (1996).
    """

    checks: pd.DataFrame
    overall: pd.DataFrame
    trajectories: pd.DataFrame
    draws: pd.DataFrame
    level: float = 0.95
    settings: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ views
    def to_frame(self) -> pd.DataFrame:
        """The per-count checks (tidy: one row per direction, count and statistic)."""
        return self.checks.copy()

    def failures(self, alpha: float = 0.05) -> pd.DataFrame:
        """The checks with a predictive p-value below ``alpha``, most extreme first."""
        c = self.checks
        return c[c["p_value"] < alpha].sort_values("p_value").reset_index(drop=True)

    def summary(self) -> dict:
        """Plain Python: per direction, count and statistic the observed value, the simulated
        mean and interval, z and p; the global statistics; the settings."""
        out = {}
        for (dr, c), g in self.checks.groupby(["direction", "committed"], sort=False):
            out.setdefault(dr, {})[int(c)] = {
                r["statistic"]: {"observed": r["observed"], "simulated": r["sim_mean"],
                                 "interval": [r["sim_low"], r["sim_high"]], "z": r["z"], "p": r["p_value"]}
                for _, r in g.iterrows()}
        glob = {f"{r['direction']}:{r['statistic']}": {"T": r["T"], "counts": int(r["counts"]), "p": r["p_value"]}
                for _, r in self.overall.iterrows()}
        return plain({"checks": out, "overall": glob, "level": self.level, "settings": self.settings})

    def __repr__(self) -> str:
        o = self.overall[self.overall["direction"] == "all"]
        worst = o.sort_values("p_value").head(2)
        parts = [f"{r['statistic']} p={fmt(r['p_value'])}" for _, r in worst.iterrows()]
        f = self.failures()
        return short_repr("Adequacy", f"fit on {self.settings.get('fit_on')}",
                          f"{len(self.checks)} checks, {len(f)} with p < 0.05", "worst overall: " + "; ".join(parts))

    def _repr_html_(self) -> str:
        rows = [(f"{r['direction']}:{r['statistic']}", r["p_value"], None, f"T = {fmt(r['T'])} over {int(r['counts'])} counts")
                for _, r in self.overall.iterrows()]
        return html_card("Adequacy", rows, subtitle=f"fit on {self.settings.get('fit_on')}; predictive p-values",
                         settings={"draws": self.settings.get("n_draws"), "run effects": self.settings.get("run_effects"),
                                   "order bias": self.settings.get("order_bias")},
                         note=".failures() lists the checks with p < 0.05; .plot() draws LLM runs against the "
                              "simulated bands per count.")

    def save(self, path) -> "Path":
        """Write to the folder ``path``; :meth:`load` reads it."""
        return save_result(path, type(self), {"level": self.level, "settings": self.settings},
                           {"checks": self.checks, "overall": self.overall, "trajectories": self.trajectories,
                            "draws": self.draws})

    @classmethod
    def load(cls, path) -> "Adequacy":
        meta, t = load_result(path, cls)
        return cls(checks=t["checks"], overall=t["overall"], trajectories=t["trajectories"], draws=t["draws"],
                   level=float(meta["level"]), settings=meta["settings"])

    @plotting
    def plot(self, direction: str | None = None, *, axes=None):
        """LLM runs against the simulated experiment, one panel per tested count.

        Thin grey lines: the LLM's runs (challenger share per round); black: their mean; light
        band: the ``level`` band of single simulated runs; dark band and line: the band and median
        of the simulated runs' mean; dotted: the window. The title gives the final-share z score.

        Returns
        -------
        numpy.ndarray of matplotlib.axes.Axes
        """
        tr = self.trajectories
        dirs = list(dict.fromkeys(tr["direction"])) if direction is None else [direction]
        if direction is not None and direction not in set(tr["direction"]):
            raise ValueError(f"direction must be one of {sorted(set(tr['direction']))}; got {direction!r}")
        panels = [(d, c) for d in dirs for c in sorted(tr.loc[tr["direction"] == d, "committed"].unique())]
        ncol = min(4, len(panels))
        nrow = -(-len(panels) // ncol)
        fig, axs = new_figure(nrow, ncol, figsize=(3.1 * ncol, 2.5 * nrow), axes=axes, sharey=True)
        z = self.checks.set_index(["direction", "committed", "statistic"])["z"]
        win = self.settings.get("window")
        for ax, (d, c) in zip(axs.flat, panels):
            t = tr[(tr["direction"] == d) & (tr["committed"] == c)]
            llm = t[t["source"] == "llm"]
            for _, g in llm.groupby("run"):
                ax.plot(g["round"], g["share"], color="0.6", lw=0.6)
            m = llm.groupby("round")["share"].mean()
            ax.plot(m.index, m.values, color="k", lw=1.4, label="LLM runs (mean)")
            for src, alpha, lab in (("sim_runs", 0.18, "simulated runs"), ("sim_mean", 0.4, "simulated mean")):
                s = t[t["source"] == src]
                ax.fill_between(s["round"], s["low"], s["high"], color="C0", alpha=alpha, lw=0, label=lab)
            s = t[t["source"] == "sim_mean"]
            ax.plot(s["round"], s["share"], color="C0", lw=1.2)
            if win:
                ax.axvline(win, color="0.3", ls=":", lw=0.8)
            zz = z.get((d, c, "final_mean"), np.nan)
            ax.set_title(f"{d}, {c} committed: z = {fmt(zz, 2)}", fontsize=8)
            ax.set_ylim(-0.02, 1.02)
        for ax in list(axs.flat)[len(panels):]:
            ax.set_visible(False)
        for ax in axs[:, 0]:
            ax.set_ylabel("challenger share")
        for ax in axs[-1, :]:
            ax.set_xlabel("round")
        axs.flat[0].legend(fontsize=6, loc="lower right")
        fig.suptitle(f"Adequacy: fit on {self.settings.get('fit_on')}, {self.settings.get('n_draws')} draws", fontsize=9)
        return axs

    @classmethod
    def _contract_example(cls) -> "Adequacy":
        """One direction tested at two counts (three LLM runs of four rounds each), literal statistics
        and bands (``tests/umbrella/test_contracts.py``)."""
        d = "overturn_A"
        checks = pd.DataFrame([(d, c, 3, s, 0.5, 0.45, 0.1, 0.25, 0.65, 0.5, 0.6)
                               for c in (1, 2) for s in ADEQUACY_STATISTICS],
                              columns=["direction", "committed", "runs", "statistic", "observed", "sim_mean", "sim_sd",
                                       "sim_low", "sim_high", "z", "p_value"])
        overall = pd.DataFrame([(dd, s, 0.5, 2, 0.8) for dd in (d, "all") for s in ADEQUACY_STATISTICS],
                               columns=["direction", "statistic", "T", "counts", "p_value"])
        tr = []
        for c in (1, 2):
            for r in range(1, 5):
                tr += [("llm", d, c, k, r, 0.1 * r + 0.05 * k, np.nan, np.nan) for k in range(3)]
                tr += [(src, d, c, -1, r, 0.1 * r + 0.05, 0.1 * r - w, 0.1 * r + 0.1 + w)
                       for src, w in (("sim_runs", 0.1), ("sim_mean", 0.05))]
        trajectories = pd.DataFrame(tr, columns=["source", "direction", "committed", "run", "round", "share", "low",
                                                 "high"])
        draws = pd.DataFrame([(k, d, c, *(0.5 for _ in ADEQUACY_STATISTICS)) for k in range(2) for c in (1, 2)],
                             columns=["draw", "direction", "committed", *ADEQUACY_STATISTICS])
        return cls(checks=checks, overall=overall, trajectories=trajectories, draws=draws,
                   settings={"fit_on": "baseline", "n_draws": 2, "window": 4})


def _fit_of(fit):
    if isinstance(fit, StrategyFit):
        return fit
    inner = getattr(fit, "fit", None)  # a Calibration
    if isinstance(inner, StrategyFit):
        return inner
    raise TypeError(f"fit must be a StrategyFit or a Calibration; got {type(fit).__name__}")


def check_adequacy(fit, log: GameLog, *, n_agents: int | None = None, llm: str | None = None, majorities=None,
                   n_draws: int = 200, window: int | None = None, run_effects="fit", order_bias: float = 0.0,
                   level: float = 0.95, design=None, rng=None) -> Adequacy:
    """Play the fitted table under the exact design of a log's committed runs and test it against them.

    Parameters
    ----------
    fit : StrategyFit or Calibration
        Two names. A fit on baselines only checks it out of sample; a fit on all runs in sample.
    log : normlab.schema.GameLog
        Holding committed-minority runs at the fit's pool and memory (e.g. an AI-norms archive).
    n_agents : int, optional
        Population size of the committed runs (default: the most common).
    llm : str, optional
        ``model`` column value when the log holds several LLMs.
    majorities : sequence of str, optional
        Directions to check (the consensus overturned; default every direction the log tests).
    n_draws : int, optional
        Posterior draws; each plays the whole experiment once.
    window : int, optional
        Rounds of the published rule (default the authors' window for the LLM at this N).
    run_effects : "fit", RunEffects or None, optional
        As :func:`normlab.calibration.predict` (``"fit"``: those stored with the fit).
    order_bias : float, optional
        First-listed bias of the prompts' name order, drawn as the authors' protocols do
        (:mod:`normlab.theory.name_order`).
    level : float, optional
        Level of the simulated intervals and bands.
    design : ExperimentDesign or sequence of them, optional
        The experiment(s) the fit is played under (default: each direction's
        :meth:`ExperimentDesign.from_log`: the counts, runs per count, cap and stop rule the experimenter
        fixed); another design tests what reading the runs under it does (e.g. one giving each run its
        own length).
    rng : optional

    Returns
    -------
    Adequacy

    Raises
    ------
    ValueError
        No committed-minority run in the log for this pool and memory; bad settings.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3, Methods;
    the authors' ``plotter.ipynb`` cells 9-10; Gelman, Meng & Stern (1996).
    """
    fit = _fit_of(fit)
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    if len(fit.names) != 2:
        raise ValueError(f"the adequacy check plays two-name designs; this fit has {len(fit.names)} names")
    D = check_int(n_draws, "n_draws", low=2)
    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    names, H = tuple(fit.names), fit.memory
    if design is None:
        designs = experiment_designs(log, names=names, memory=H, n_agents=n_agents, llm=llm, window=window)
    else:
        designs = [design] if isinstance(design, ExperimentDesign) else list(design)
        if not all(isinstance(d, ExperimentDesign) for d in designs):
            raise TypeError("design must be an ExperimentDesign or a sequence of them")
    if majorities is not None:
        want = [str(m) for m in np.atleast_1d(majorities)]
        bad = set(want) - set(names)
        if bad:
            raise ValueError(f"majorities must be names of the pool {names}; got {sorted(bad)}")
        designs = [d for d in designs if d.majority in want]
    if not designs:
        raise ValueError(f"the log holds no committed-minority run for the pool {names} at memory {H}")
    ns = {d.n_agents for d in designs}
    if len(ns) > 1:
        raise ValueError(f"the directions' runs have different N {sorted(ns)}; choose n_agents=")
    N = ns.pop()
    designs = [replace(d, extend=False) for d in designs]
    win = designs[0].window
    pred = predict(fit, n_agents=N, n_draws=D, design=designs, consensus=False, strength=False, committed=[0],
                   n_runs_flip=1, design_runs=1, directions=[(d.majority, d.challenger) for d in designs],
                   max_round=win, run_effects=run_effects, order_bias=order_bias, rng=rng)
    a = (1 - float(level)) / 2
    rows, draw_rows, traj = [], [], []
    for des in designs:
        dr = des.direction
        runs = committed_runs(log, names=names, majority=des.majority, memory=H, n_agents=N, llm=llm)
        obs_sh = challenger_shares(GameLog(log.decisions[log.decisions["run"].isin(runs["run"])], runs))
        by_run = {r: g.sort_values("round")["share"].to_numpy() for r, g in obs_sh.groupby("run")}
        ex = pred.experiment[(pred.experiment["majority"] == des.majority)]
        sh = pred.experiment_shares[pred.experiment_shares["majority"] == des.majority]
        for c, L in zip(des.counts, des.lengths):
            rc = runs[runs["committed_count"] == c]
            trs = [by_run.get(r, np.zeros(0)) for r in rc["run"]]
            finals = np.array([_final_shares(t, int(T) // N, win) for t, T in zip(trs, rc["n_interactions"])])
            try:
                o_last3 = published_rule(trs, max_round=win)["last3"]
            except ValueError:  # the window is longer than these runs: the rule cannot be read
                o_last3 = np.nan
            obs = _count_stats(finals, o_last3)
            for r, t in zip(rc["run"], trs):
                traj.append(pd.DataFrame({"source": "llm", "direction": dr, "committed": int(c), "run": int(r),
                                          "round": np.arange(1, len(t) + 1), "share": t, "low": np.nan,
                                          "high": np.nan}))
            # simulated: per draw the runs of this count (each at most its cap L[k], ending earlier under a stop rule)
            s = sh[sh["committed"] == c]
            piv = s.pivot_table(index=["draw", "run"], columns="round", values="share", aggfunc="first")
            R = int(piv.columns.max()) if len(piv) else 0
            mat = piv.reindex(columns=range(1, R + 1)).to_numpy()
            dr_ids = piv.index.get_level_values(0).to_numpy()
            run_k = piv.index.get_level_values(1).to_numpy()
            # a simulated run's own rounds (a streak-stopped run ends before its cap, its last rounds the consensus
            # it stopped on), not its design slot: the cap is a bound, never the run's length
            rec = ~np.isnan(mat)
            comp = np.where(rec.any(axis=1), R - np.argmax(rec[:, ::-1], axis=1), 0) if R else np.zeros(len(mat), int)
            sim_final = np.array([_final_shares(mat[i], comp[i], win) for i in range(len(mat))])
            l3 = ex[ex["committed"] == c].set_index("draw")["last3"]
            stats = []
            for d in np.unique(dr_ids):
                st = _count_stats(sim_final[dr_ids == d], float(l3.get(d, np.nan)))
                stats.append(st)
                draw_rows.append({"draw": int(d), "direction": dr, "committed": int(c), **st})
            for name in ADEQUACY_STATISTICS:
                v = np.array([st[name] for st in stats], float)
                fin = v[~np.isnan(v)]
                mu = float(fin.mean()) if fin.size else np.nan
                sd = float(fin.std(ddof=1)) if fin.size > 1 else np.nan
                ob = obs[name]
                z = (ob - mu) / sd if sd and sd > 0 and not np.isnan(ob) else np.nan
                rows.append({"direction": dr, "committed": int(c), "runs": len(rc), "statistic": name, "observed": ob,
                             "sim_mean": mu, "sim_sd": sd,
                             "sim_low": float(np.quantile(fin, a)) if fin.size else np.nan,
                             "sim_high": float(np.quantile(fin, 1 - a)) if fin.size else np.nan,
                             "z": z, "p_value": _p_two_sided(v, ob)})
            if R:
                with np.errstate(invalid="ignore"):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        means = np.vstack([np.nanmean(mat[dr_ids == d], axis=0) for d in np.unique(dr_ids)])
                        for src, m in (("sim_runs", mat), ("sim_mean", means)):
                            traj.append(pd.DataFrame({
                                "source": src, "direction": dr, "committed": int(c), "run": -1,
                                "round": np.arange(1, R + 1), "share": np.nanmedian(m, axis=0),
                                "low": np.nanquantile(m, a, axis=0), "high": np.nanquantile(m, 1 - a, axis=0)}))
    checks = pd.DataFrame(rows)
    draws = pd.DataFrame(draw_rows)
    overall = _overall(checks, draws)
    re = pred.settings.get("run_effects")
    settings = {"fit_on": fit.meta.get("fit_on"), "fit_kind": fit.kind, "llm": fit.meta.get("llm"), "n_draws": D,
                "n_agents": N, "window": win, "run_effects": bool(re), "order_bias": float(order_bias),
                "name_order": "independent (baselines), shared (committed runs)",
                "designs": [d.to_dict() for d in designs], "final_rounds": FINAL_ROUNDS, "flip_sum": FLIP_SUM,
                "rng": pred.settings.get("rng")}
    return Adequacy(checks=checks, overall=overall, trajectories=pd.concat(traj, ignore_index=True), draws=draws,
                    level=float(level), settings=settings)


def _overall(checks: pd.DataFrame, draws: pd.DataFrame) -> pd.DataFrame:
    """Per direction (and all) and statistic: the sum over counts of squared z, referred to the same
    sum of every simulated experiment (standardised by the same simulated means and sds)."""
    out = []
    for name in ADEQUACY_STATISTICS:
        c = checks[(checks["statistic"] == name) & checks["z"].notna()]
        for dr in list(dict.fromkeys(c["direction"])) + ["all"]:
            cc = c if dr == "all" else c[c["direction"] == dr]
            if cc.empty:
                continue
            T = float(np.sum(cc["z"] ** 2))
            tsim = None
            for _, r in cc.iterrows():
                v = draws[(draws["direction"] == r["direction"]) & (draws["committed"] == r["committed"])] \
                    .set_index("draw")[name]
                zz = ((v - r["sim_mean"]) / r["sim_sd"]) ** 2
                tsim = zz if tsim is None else tsim.add(zz, fill_value=np.nan)
            ts = tsim.dropna().to_numpy()
            p = (1 + np.sum(ts >= T)) / (1 + ts.size) if ts.size else np.nan
            out.append({"direction": dr, "statistic": name, "T": T, "counts": len(cc), "p_value": float(p)})
    return pd.DataFrame(out, columns=["direction", "statistic", "T", "counts", "p_value"])


# ----------------------------------------------------------------------------- partners' agreement
@dataclass(frozen=True)
class PairAgreement:
    """Partners' agreement beyond the state table, per run kind, and the first-listed bias it implies.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per run kind: ``kind``, ``name_order`` (the authors' protocol: ``independent`` for
        baselines, ``shared`` for committed and evolved runs), ``pairs`` (interactions of two
        uncommitted agents with valid answers), ``observed`` (pairs that agree), ``predicted``
        (sum over pairs of ``sum_w p_i(w) p_j(w)`` from the table), ``z``, ``predicted_run`` /
        ``z_run`` (the same with each run's own shift of the logit, ML per run: between-run
        heterogeneity removed), ``order_bias`` (``|gamma|`` that makes the run-shifted prediction
        match under a shared order) with ``order_bias_low`` / ``order_bias_high`` (95 %; 6 is the
        search bound: no upper limit).
    settings : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), the authors'
    ``simulation_module.py`` (``population``, ``committed``).
    """

    table: pd.DataFrame
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def summary(self) -> dict:
        return plain({"kinds": self.table.to_dict(orient="records"), "settings": self.settings})

    def __repr__(self) -> str:
        parts = [f"{r['kind']}: z={fmt(r['z'], 3)} (run-shifted {fmt(r['z_run'], 3)}), |gamma|={fmt(r['order_bias'], 2)}"
                 for _, r in self.table.iterrows()]
        return short_repr("PairAgreement", self.settings.get("llm", ""), *parts)

    def _repr_html_(self) -> str:
        rows = [(r["kind"], r["z"], None, f"{int(r['observed'])} of {int(r['pairs'])} agree, {fmt(r['predicted'])} "
                 f"predicted; run-shifted z {fmt(r['z_run'])}; |gamma| {fmt(r['order_bias'])} "
                 f"[{fmt(r['order_bias_low'])}, {fmt(r['order_bias_high'])}]") for _, r in self.table.iterrows()]
        return html_card("PairAgreement", rows, subtitle="partners' agreement beyond the state table (z)",
                         settings={k: v for k, v in self.settings.items() if k in ("llm", "fit")})

    @plotting
    def plot(self, *, ax=None):
        """z of the partners' agreement per run kind, with and without run shifts.

        Returns
        -------
        matplotlib.axes.Axes
        """
        t = self.table
        ax = new_axes(ax, (5.5, 3.2))
        x = np.arange(len(t))
        ax.bar(x - 0.2, t["z"], 0.4, label="table")
        ax.bar(x + 0.2, t["z_run"], 0.4, label="table + run shift")
        ax.axhline(1.96, color="0.4", ls=":", lw=0.8)
        ax.axhline(-1.96, color="0.4", ls=":", lw=0.8)
        ax.set_xticks(x)
        ax.set_xticklabels([f"{k}\n({o} order)" for k, o in zip(t["kind"], t["name_order"])], fontsize=8)
        ax.set(ylabel="z (observed - predicted agreement)", title="partners' agreement beyond the state table")
        ax.legend(fontsize=7)
        return ax

    @classmethod
    def _contract_example(cls) -> "PairAgreement":
        """Two run kinds, literal agreement counts (``tests/umbrella/test_contracts.py``)."""
        table = pd.DataFrame([("baseline", "independent", 400, 300, 290.0, 1.2, 296.0, 0.5, 0.0, 0.0, 0.8),
                              ("swap", "shared", 200, 160, 140.0, 3.1, 150.0, 1.8, 0.9, 0.3, 1.6)],
                             columns=["kind", "name_order", "pairs", "observed", "predicted", "z", "predicted_run", "z_run",
                                      "order_bias", "order_bias_low", "order_bias_high"])
        return cls(table=table, settings={"llm": "toy"})


#: The name order of each run kind in the authors' code: population() per player, committed() per interaction.
KIND_ORDER = {"baseline": "independent", "swap": "shared", "evolved": "shared"}


def _run_shift(y, logit, run) -> np.ndarray:
    """Per run the ML shift ``b`` of the logit (Newton, vectorised over runs; clipped at +-8)."""
    nr = int(run.max()) + 1 if run.size else 0
    b = np.zeros(nr)
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(logit + b[run])))
        g = np.bincount(run, weights=y - p, minlength=nr)
        h = np.bincount(run, weights=p * (1 - p), minlength=nr)
        step = np.where(h > 1e-9, g / np.maximum(h, 1e-9), 0.0)
        b = np.clip(b + step, -8, 8)
        if np.max(np.abs(step), initial=0.0) < 1e-10:
            break
    return b


def _solve_gamma(pi, pj, target) -> float:
    """|gamma| >= 0 with mean shared-order agreement equal to ``target`` (bisection on [0, 6])."""
    def f(g):
        return float(np.mean(pair_agreement_probability(pi, pj, g, "shared"))) - target
    if f(0.0) >= 0:
        return 0.0
    hi = 6.0
    if f(hi) < 0:
        return hi
    lo = 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def pair_agreement(log: GameLog, *, names, memory: int | None = None, n_agents: int | None = None,
                   llm: str | None = None, fit=None, kinds=("baseline", "swap", "evolved")) -> PairAgreement:
    """Do the two agents of an interaction agree more often than their memory states say?

    The theory draws the two choices of an interaction independently from the table. In the
    authors' committed-minority protocol both uncommitted agents see the same name order, so a
    first-listed bias would correlate them (:mod:`normlab.theory.name_order`). For every
    interaction of two uncommitted agents with valid answers the table gives the probability that
    they agree, ``sum_w p(w | s_i) p(w | s_j)``; the observed agreements are compared with the sum
    (z with the binomial variance). Between-run heterogeneity also makes partners agree (both share
    their run's shift of the logit), so the check is repeated with each run's own ML shift; what
    remains under a shared order is turned into the first-listed bias ``|gamma|`` that explains it,
    with a 95 % interval from the binomial error of the agreement count.

    Parameters
    ----------
    log : normlab.schema.GameLog
    names : sequence of str
        Two-name pool.
    memory : int, optional
        Memory length (default the most common of the pool's runs).
    n_agents : int, optional
        Keep the runs of this population size only (default: every N).
    llm : str, optional
    fit : StrategyFit, optional
        The table to test against (default: a Dirichlet table per state fitted on every run of
        these kinds -- the most flexible table, so only the pairing is tested).
    kinds : sequence of str, optional

    Returns
    -------
    PairAgreement

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), the authors'
    ``simulation_module.py`` (``population``, ``committed``).
    """
    names = _check_names(names)
    if len(names) != 2:
        raise ValueError(f"pair_agreement needs a two-name pool; got {names}")
    kinds = tuple(str(k) for k in kinds)
    unknown = set(kinds) - set(KIND_ORDER)
    if unknown:
        raise ValueError(f"kinds must be among {sorted(KIND_ORDER)}; got {sorted(unknown)}")
    sel = select_runs(log, names=names, memory=memory, n_agents=n_agents, model=llm, fit_on=kinds)
    if memory is None:
        memory = int(sel.runs["memory"].value_counts().index[0])
        sel = select_runs(sel, memory=memory, fit_on=kinds)
    H = int(memory)
    if fit is None:
        fit = fit_strategy(counts_from_log(sel, names=names, memory=H), "empirical", meta={"fit_on": list(kinds)})
    elif tuple(fit.names) != names or fit.memory != H:
        raise ValueError(f"the fit is for {tuple(fit.names)}, H={fit.memory}; the pairs for {names}, H={H}")
    table = fit.mean_table().table
    p0 = np.clip(table[:, 0], 1e-9, 1 - 1e-9)
    logit_t = np.log(p0 / (1 - p0))
    smap = _state_index_map(names, H)
    d = sel.decisions
    d = d[d["valid"].to_numpy() & ~d["committed"].to_numpy()]
    s_idx = d["memory_state"].map(smap).to_numpy()
    y = (d["name"].to_numpy() == names[0]).astype(float)
    run_codes, run = np.unique(d["run"].to_numpy(), return_inverse=True)
    b = _run_shift(y, logit_t[s_idx], run)
    dd = pd.DataFrame({"run": d["run"].to_numpy(), "t": d["t"].to_numpy(), "y": y,
                       "p": table[s_idx, 0], "pr": 1 / (1 + np.exp(-(logit_t[s_idx] + b[run])))})
    dd = dd.sort_values(["run", "t"], kind="stable")  # an interaction of two uncommitted agents: two rows
    key = dd["run"].to_numpy().astype(np.int64) * (int(dd["t"].max()) + 1) + dd["t"].to_numpy()
    grp = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1
    both = dd[np.bincount(grp)[grp] == 2]
    A = both.iloc[0::2].reset_index(drop=True)
    B = both.iloc[1::2].reset_index(drop=True)
    kind_of = sel.runs.set_index("run")["kind"]
    rows = []
    for k in kinds:
        m = (A["run"].map(kind_of) == k).to_numpy()
        if not m.any():
            continue
        a, bb = A[m], B[m]
        agree = float(np.sum(a["y"].to_numpy() == bb["y"].to_numpy()))
        pi = np.column_stack([a["p"], 1 - a["p"]])
        pj = np.column_stack([bb["p"], 1 - bb["p"]])
        q = np.sum(pi * pj, axis=1)
        pri = np.column_stack([a["pr"], 1 - a["pr"]])
        prj = np.column_stack([bb["pr"], 1 - bb["pr"]])
        qr = np.sum(pri * prj, axis=1)
        n = int(m.sum())
        se, ser = math.sqrt(np.sum(q * (1 - q))), math.sqrt(np.sum(qr * (1 - qr)))
        sd_rate = ser / n
        g_hat = _solve_gamma(pri, prj, agree / n)
        g_lo = _solve_gamma(pri, prj, agree / n - 1.96 * sd_rate)
        g_hi = _solve_gamma(pri, prj, agree / n + 1.96 * sd_rate)
        rows.append({"kind": k, "name_order": KIND_ORDER[k], "runs": int(a["run"].nunique()), "pairs": n,
                     "observed": agree, "predicted": float(q.sum()), "z": (agree - q.sum()) / se if se else np.nan,
                     "predicted_run": float(qr.sum()), "z_run": (agree - qr.sum()) / ser if ser else np.nan,
                     "order_bias": g_hat, "order_bias_low": g_lo, "order_bias_high": g_hi})
    settings = {"llm": ", ".join(sorted(map(str, sel.runs["model"].unique()))), "names": list(names), "memory": H,
                "n_agents": sorted(int(n) for n in sel.runs["n_agents"].unique()),
                "fit": f"{fit.kind} on {fit.meta.get('fit_on')}",
                "run_shift_sd": float(np.std(b)) if b.size else float("nan")}
    return PairAgreement(table=pd.DataFrame(rows), settings=settings)


# The type tag of saved results (normlab.load) and pickles name Adequacy by its path before the regroup into
# sub-packages (issue 30), which still imports it: folders saved before and after load alike.
Adequacy.__module__ = "normlab.calibration.adequacy"
