"""The result of :func:`normlab.calibration.predict`: :class:`Prediction`, one entry per posterior
draw, and its readings over draws -- P(consensus on each name), rounds to 95 % success, the
critical masses by the ``published`` and ``per_run`` criteria, flip curves, relative strength --
with equal-tailed credible intervals; its display, plots and save/load.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables
S2-S3, Methods "Committed Minorities", Supplementary Text "Characterizing Relative Strength".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import (error_bars, fmt, fmt_interval, html_card, legend_outside, load_result, new_axes, plain, plotting,
                              save_result, short_repr)
from normlab.theory.criteria import check_criterion

from .readings import DESIGN_RUNS, FLIP_LEVEL, NONE, _key
from .wording import strength_meanings

#: Columns of the experiment tables (empty without experiment designs).
EXPERIMENT_COLUMNS = ("draw", "majority", "challenger", "committed", "tested", "runs", "simulated", "met", "last3")
EXPERIMENT_CM_COLUMNS = ("draw", "majority", "challenger", "critical_mass")
EXPERIMENT_SHARE_COLUMNS = ("draw", "majority", "challenger", "committed", "run", "round", "share")

__all__ = ["Prediction"]


def _q(x, level, method="inverted_cdf"):
    x = np.asarray(x, float)
    x = x[~np.isnan(x)]
    if not x.size:
        return float("nan"), float("nan"), float("nan")
    a = (1 - level) / 2
    return (float(np.quantile(x, 0.5, method=method)), float(np.quantile(x, a, method=method)),
            float(np.quantile(x, 1 - a, method=method)))


def _fin(v):
    return None if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))) else v


@dataclass(frozen=True)
class Prediction:
    """Population-level predictions of a fitted strategy, one entry per posterior draw.

    Attributes
    ----------
    names : tuple of str
    memory, n_agents, n_draws, within_rounds : int
    level : float
        Credible level of the intervals (equal-tailed over draws).
    consensus : pandas.DataFrame
        ``draw``, ``name`` (a name or ``"none"``), ``runs`` (runs won), ``n_runs``.
    success : pandas.DataFrame
        ``draw``, ``round`` (from 1), ``success_rate`` (mean over the draw's runs, stopped runs
        padded with 1).
    draw_stats : pandas.DataFrame
        ``draw``, ``rounds_to_95``, ``consensus_rounds`` (mean stop time in rounds),
        ``converged`` (fraction of runs that stopped within ``max_rounds``).
    flips : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``committed``, ``n_runs``, ``n_flips``
        (``per_run``), ``simulated`` (False where the monotone shortcut filled the count in),
        ``published_last3`` and ``published_success`` (the published rule on the draw's
        replication of the paper's experiment).
    critical_mass_draws : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``published``, ``per_run`` (``inf``: not
        reached).
    strength : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``width``, ``boundary``, ``pull``,
        ``exploration`` and ``p_win_<f>`` (P(consensus on the majority name) from a mixture
        with fraction ``f`` of its holders); empty if not computed.
    settings : dict
        Everything the prediction was made with (``designs``: the experiment designs;
        ``run_effects``: the between-run heterogeneity played, or None).
    fit_summary : dict
    experiment : pandas.DataFrame
        With experiment designs: per draw and count of each design's grid ``majority``,
        ``challenger``, ``committed``, ``tested`` (a count the experiment tested; else the
        extension past its last count), ``runs``, ``simulated`` (counts after the first that met
        the rule are simulated only where tested), ``met`` (the published rule on the simulated
        runs), ``last3``; empty without designs.
    experiment_cm : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``critical_mass``: the smallest count of the
        design's grid whose runs met the rule (``inf``: none).
    experiment_shares : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``committed``, ``run``, ``round``, ``share``: the
        simulated challenger share per round of every run of the tested counts (the trajectories
        the model adequacy check compares with the LLM's).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables S2-S3,
    Methods "Committed Minorities", Supplementary Text "Characterizing Relative Strength".
    """

    names: tuple
    memory: int
    n_agents: int
    n_draws: int
    within_rounds: int
    level: float
    consensus: pd.DataFrame
    success: pd.DataFrame
    draw_stats: pd.DataFrame
    flips: pd.DataFrame
    critical_mass_draws: pd.DataFrame
    strength: pd.DataFrame
    settings: dict = field(default_factory=dict)
    fit_summary: dict = field(default_factory=dict)
    experiment: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EXPERIMENT_COLUMNS)))
    experiment_cm: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EXPERIMENT_CM_COLUMNS)))
    experiment_shares: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EXPERIMENT_SHARE_COLUMNS)))

    # ------------------------------------------------------------------ summaries
    def p_consensus(self) -> dict:
        """Posterior predictive probability that a run converges on each name (pooled over draws).

        Returns
        -------
        dict
            name -> probability (``"none"`` not included; see :meth:`consensus_summary`).
        """
        c = self.consensus
        if c.empty:  # predicted with consensus=False
            return {}
        tot = c.groupby("name")["runs"].sum()
        n = c.drop_duplicates("draw")["n_runs"].sum()
        return {nm: float(tot.get(nm, 0) / n) for nm in self.names} if n else {}

    def consensus_summary(self) -> pd.DataFrame:
        """Per name (and ``"none"``): pooled probability, and the median and interval of the
        per-draw fraction of runs."""
        c = self.consensus.copy()
        if c.empty:  # predicted with consensus=False
            return pd.DataFrame(columns=["name", "probability", "median", "low", "high"])
        c["p"] = c["runs"] / c["n_runs"]
        rows = []
        for nm, g in c.groupby("name", sort=False):
            med, lo, hi = _q(g["p"], self.level, "linear")
            rows.append({"name": nm, "probability": float(g["runs"].sum() / g["n_runs"].sum()), "median": med,
                         "low": lo, "high": hi})
        return pd.DataFrame(rows)

    def rounds_to_95(self) -> dict:
        """Median and credible interval of the round at which the mean success rate reaches 0.95
        (``n_runs_consensus`` runs per draw, like the 40 runs of a published experiment)."""
        x = self.draw_stats["rounds_to_95"].to_numpy(float)
        est, lo, hi = _q(x, self.level)
        return {"estimate": est, "low": lo, "high": hi, "p_not_reached": float(np.mean(np.isnan(x))) if x.size else float("nan")}

    def consensus_rounds(self) -> dict:
        """Median and interval of the mean stop time (rounds) of converging runs."""
        est, lo, hi = _q(self.draw_stats["consensus_rounds"], self.level, "linear")
        return {"estimate": est, "low": lo, "high": hi}

    def success_curve(self) -> pd.DataFrame:
        """Mean success rate per round: ``round``, ``mean``, ``median``, ``low``, ``high`` over draws."""
        s = self.success
        a = (1 - self.level) / 2
        g = s.groupby("round")["success_rate"]
        return pd.DataFrame({"mean": g.mean(), "median": g.median(), "low": g.quantile(a),
                             "high": g.quantile(1 - a)}).reset_index()

    def critical_mass(self, criterion: str | None = None) -> dict:
        """Critical mass per direction by the ``published`` and ``per_run`` criteria.

        Parameters
        ----------
        criterion : {"published", "per_run"}, optional
            Return only that reading (``overturn_<X>`` -> its dict); default both.

        Returns
        -------
        dict
            ``overturn_<X>`` -> ``published`` and ``per_run``, each ``estimate`` (median over
            draws), ``low``, ``high`` (credible interval; ``inf`` = not reached within the swept
            counts) and ``p_not_reached``; ``per_run`` also ``pooled`` (smallest count where the
            pooled posterior predictive flip probability reaches ``flip_level``). The top-level
            ``estimate``, ``low``, ``high``, ``p_not_reached`` repeat ``published`` (the reading of
            Flint Ashery et al. 2025, Table S3), with ``criterion``, ``majority``, ``challenger``, ``n_agents``.
            ``published`` is the smallest count whose simulated replication of the paper's
            experiment (``design_runs`` runs per count, window ``max_round``) meets the authors'
            ensemble rule, per draw -- so its interval carries parameter *and* experiment-size
            uncertainty; ``per_run`` the smallest count where at least ``flip_level`` of the
            draw's ``n_runs_flip`` runs flip within ``within_rounds``.
        """
        if criterion is not None:
            if check_criterion(criterion) == "end_of_run":
                raise ValueError("predictions report the 'published' and 'per_run' criteria; got 'end_of_run'")
        out = {}
        W = len(self.names)
        curve = self.flip_curve()
        for (x, y), g in self.critical_mass_draws.groupby(["majority", "challenger"], sort=False):
            entry = {}
            for crit in ("published", "per_run"):
                v = g[crit].to_numpy(float)
                est, lo, hi = _q(v, self.level)
                entry[crit] = {"estimate": est, "low": lo, "high": hi, "p_not_reached": float(np.mean(np.isinf(v)))}
            cv = curve[(curve["majority"] == x) & (curve["challenger"] == y)]
            pooled = cv.loc[cv["p_flip"] >= self.settings.get("flip_level", FLIP_LEVEL), "committed"]
            entry["per_run"]["pooled"] = float(pooled.min()) if len(pooled) else math.inf
            exp = self._experiment_entry(x, y)
            if criterion is not None:
                out[_key(x, y, W)] = exp if (exp is not None and criterion == "published") else entry[criterion]
                continue
            head = exp if exp is not None else entry["published"]
            out[_key(x, y, W)] = {**{k: head[k] for k in ("estimate", "low", "high", "p_not_reached")},
                                  "criterion": "published", "design": "experiment" if exp is not None else "paper",
                                  "published": entry["published"], "per_run": entry["per_run"], "majority": x,
                                  "challenger": y, "n_agents": self.n_agents}
            if exp is not None:
                out[_key(x, y, W)]["experiment"] = exp
        return out

    def _experiment_entry(self, x, y) -> dict | None:
        """The published-rule critical mass on a direction's experiment design: median and
        interval over draws of the smallest count of its grid whose runs met the rule, the
        probability of each count, and how much lies past the tested counts."""
        cm = self.experiment_cm
        if cm is None or cm.empty:
            return None
        g = cm[(cm["majority"] == x) & (cm["challenger"] == y)]
        if g.empty:
            return None
        v = g["critical_mass"].to_numpy(float)
        est, lo, hi = _q(v, self.level)
        des = next((d for d in self.settings.get("designs") or () if d["majority"] == x and d["challenger"] == y),
                   {})
        tested = list(des.get("counts", []))
        vals, k = np.unique(v, return_counts=True)
        dist = {("not reached" if np.isinf(a) else int(a)): float(b / len(v)) for a, b in zip(vals, k)}
        last = max(tested) if tested else math.inf
        ex = self.experiment
        e = ex[(ex["majority"] == x) & (ex["challenger"] == y) & ex["tested"]]
        p_met = e.groupby("committed")["met"].mean()
        return {"estimate": est, "low": lo, "high": hi, "p_not_reached": float(np.mean(np.isinf(v))),
                "p_beyond_tested": float(np.mean(v > last)), "distribution": dist,
                "p_met": {int(c): float(p) for c, p in p_met.items()}, "design": des}

    def flip_curve(self) -> pd.DataFrame:
        """Posterior predictive flip curve per committed count: ``majority``, ``challenger``,
        ``committed``, ``p_flip`` (``per_run``: pooled runs), ``low``, ``high`` (interval of the
        per-draw flip frequency), ``n_flips``, ``n_runs``, ``p_published`` (fraction of draws
        whose simulated replication of the paper's experiment meets the published rule at this
        count)."""
        f = self.flips.copy()
        f["p"] = f["n_flips"] / f["n_runs"]
        f["pub"] = f["published_success"].astype(float)
        a = (1 - self.level) / 2
        g = f.groupby(["majority", "challenger", "committed"], sort=False)
        out = g.agg(n_flips=("n_flips", "sum"), n_runs=("n_runs", "sum"), low=("p", lambda s: s.quantile(a)),
                    high=("p", lambda s: s.quantile(1 - a)), p_published=("pub", "mean")).reset_index()
        out["p_flip"] = out["n_flips"] / out["n_runs"]
        return out[["majority", "challenger", "committed", "p_flip", "low", "high", "n_flips", "n_runs", "p_published"]]

    def relative_strength(self) -> pd.DataFrame:
        """Per convention: median and interval of ``width``, ``boundary``, ``pull``, ``exploration``."""
        if self.strength.empty:
            return pd.DataFrame(columns=["majority", "quantity", "estimate", "low", "high"])
        rows = []
        for x, g in self.strength.groupby("majority", sort=False):
            for q in ("width", "boundary", "pull", "exploration"):
                est, lo, hi = _q(g[q], self.level, "linear")
                rows.append({"majority": x, "quantity": q, "estimate": est, "low": lo, "high": hi})
        return pd.DataFrame(rows)

    def to_frame(self) -> pd.DataFrame:
        """All headline quantities in long format: ``quantity``, ``key``, ``estimate``, ``low``,
        ``high``."""
        rows = []
        for _, r in self.consensus_summary().iterrows():
            rows.append({"quantity": "p_consensus", "key": r["name"], "estimate": r["probability"],
                         "low": r["low"], "high": r["high"]})
        r95 = self.rounds_to_95()
        rows.append({"quantity": "rounds_to_95", "key": "", "estimate": r95["estimate"], "low": r95["low"],
                     "high": r95["high"]})
        cr = self.consensus_rounds()
        rows.append({"quantity": "consensus_rounds", "key": "", **cr})
        for k, v in self.critical_mass().items():
            for crit, q in (("published", "critical_mass"), ("per_run", "critical_mass_per_run"),
                            ("experiment", "critical_mass_experiment")):
                if crit in v:
                    rows.append({"quantity": q, "key": k, "estimate": v[crit]["estimate"], "low": v[crit]["low"],
                                 "high": v[crit]["high"]})
        for _, r in self.relative_strength().iterrows():
            rows.append({"quantity": r["quantity"], "key": r["majority"], "estimate": r["estimate"], "low": r["low"],
                         "high": r["high"]})
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        """JSON-friendly summary (the ``normlab calibrate --json`` output)."""
        def clean(v):
            if isinstance(v, dict):
                return {kk: clean(vv) for kk, vv in v.items()}
            return _fin(v) if isinstance(v, float) else v

        cm = {k: clean(v) for k, v in self.critical_mass().items()}
        fc = self.flip_curve()
        curves = {}
        for (x, y), g in fc.groupby(["majority", "challenger"], sort=False):
            curves[_key(x, y, len(self.names))] = [
                {"committed": int(r["committed"]), "p_flip": float(r["p_flip"]), "low": float(r["low"]),
                 "high": float(r["high"]), "p_published": float(r["p_published"])} for _, r in g.iterrows()]
        r95 = {k: _fin(v) for k, v in self.rounds_to_95().items()}
        cons = self.consensus_summary().set_index("name")
        strength = {}
        for _, r in self.relative_strength().iterrows():
            strength.setdefault(r["majority"], {})[r["quantity"]] = {"estimate": _fin(r["estimate"]),
                                                                   "low": _fin(r["low"]), "high": _fin(r["high"])}
        out = {
            "names": list(self.names),
            "memory": self.memory,
            "n_agents": self.n_agents,
            "draws": self.n_draws,
            "level": self.level,
            "within_rounds": self.within_rounds,
            "p_consensus": self.p_consensus(),
            "p_no_consensus": float(cons.loc[NONE, "probability"]) if NONE in cons.index else 0.0,
            "p_consensus_interval": {nm: [_fin(cons.loc[nm, "low"]), _fin(cons.loc[nm, "high"])]
                                     for nm in self.names if nm in cons.index},
            "rounds_to_95": r95,
            "consensus_rounds": {k: _fin(v) for k, v in self.consensus_rounds().items()},
            "critical_mass": cm,
            "flip_curve": curves,
            "relative_strength": strength,
            "settings": _summary_settings(self.settings),
        }
        return plain(out)

    # ------------------------------------------------------------------ display, save / load
    def _headline(self) -> list:
        """``(label, estimate, (low, high), note)`` rows of the headline quantities."""
        rows = []
        cs = self.consensus_summary()
        for _, r in cs.iterrows():
            rows.append((f"P(consensus on {r['name']})", r["probability"], (r["low"], r["high"]),
                         "pooled; interval of the per-draw fraction"))
        if len(self.draw_stats):
            r95 = self.rounds_to_95()
            rows.append(("rounds to 95% success", r95["estimate"], (r95["low"], r95["high"]),
                         f"not reached in {r95['p_not_reached']:.0%} of draws" if r95["p_not_reached"] else ""))
            cr = self.consensus_rounds()
            rows.append(("rounds to 3N consecutive successes", cr["estimate"], (cr["low"], cr["high"])))
        for k, v in self.critical_mass().items():
            if "experiment" in v:
                e = v["experiment"]
                rows.append((f"critical mass {k} (published rule, the experiment's design)", e["estimate"],
                             (e["low"], e["high"]), f"counts {', '.join(map(str, e['design'].get('counts', [])))}; "
                                                    f"{e['p_beyond_tested']:.0%} of draws past the last tested count"))
            rows.append((f"critical mass {k} (published rule" + (", paper's design)" if "experiment" in v else ")"),
                         v["published"]["estimate"], (v["published"]["low"], v["published"]["high"]),
                         f"{self.settings.get('design_runs', DESIGN_RUNS)}-run experiment per draw"))
            pr = v["per_run"]
            rows.append((f"critical mass {k} (per run)", pr["estimate"], (pr["low"], pr["high"]),
                         f"P(flip) >= {self.settings.get('flip_level', FLIP_LEVEL):g} within {self.within_rounds} rounds"))
        meanings = strength_meanings(self.within_rounds)
        for _, r in self.relative_strength().iterrows():
            rows.append((f"{r['quantity']} of {r['majority']}", r["estimate"], (r["low"], r["high"]),
                         meanings.get(r["quantity"], "").replace("X", r["majority"])))
        return rows

    def __repr__(self) -> str:
        parts = [f"names {','.join(self.names)}", f"H={self.memory}", f"N={self.n_agents}", f"{self.n_draws} draws"]
        pc = self.p_consensus()
        if pc:
            parts.append("P(consensus) " + ", ".join(f"{k} {v:.2f}" for k, v in pc.items()))
        for k, v in self.critical_mass().items():
            parts.append(f"critical mass {k} {fmt(v['estimate'])} {fmt_interval(v['low'], v['high'])}")
        if len(self.draw_stats):
            r = self.rounds_to_95()
            parts.append(f"rounds to 95% success {fmt(r['estimate'])} {fmt_interval(r['low'], r['high'])}")
        return short_repr("Prediction", *parts)

    def _repr_html_(self) -> str:
        fs = self.fit_summary or {}
        return html_card("Prediction", self._headline(), level=self.level,
                         subtitle=f"{fs.get('kind', 'strategy')} fit, names {','.join(self.names)}, H = {self.memory}, "
                                  f"N = {self.n_agents}",
                         settings={"posterior draws": self.n_draws, "flip window (rounds)": self.within_rounds,
                                   "published window (rounds)": self.settings.get("max_round"),
                                   "runs per draw (convergence / flips)":
                                       f"{self.settings.get('n_runs_consensus')} / {self.settings.get('n_runs_flip')}"},
                         note="equal-tailed credible intervals over posterior draws; .plot() draws the flip curves "
                              "(kind='success': the success curve); .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "flip", *, ax=None, observed=None):
        """Posterior predictive curves: flip probability against the committed count (one line
        per direction), or the mean success rate per round, with 95% bands over draws.

        Parameters
        ----------
        kind : {"flip", "success"}, optional
            ``flip`` (Fig. 3B analogue): P(flip within the window) pooled over draws, the band
            of the per-draw flip frequency, and (dashed) the fraction of draws whose simulated
            replication of the paper's experiment meets the published rule; the critical masses
            of both readings in the legend. ``success`` (Fig. 1A analogue): mean success rate per
            round, band over draws, and the 0.95 level.
        ax : matplotlib Axes, optional
        observed : pandas.Series or EmpiricalCriticalMass, optional
            Observed values on top: a success curve indexed by round (``success``), or the
            empirical flip curves of committed-minority runs (``flip``, Clopper-Pearson 95%).

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. 1A and 3B, Table S3.
        """
        if kind not in ("flip", "success"):
            raise ValueError(f"kind must be 'flip' or 'success'; got {kind!r}")
        if kind == "success":
            if self.success.empty:
                raise ValueError("this prediction has no convergence runs (predicted with consensus=False)")
            ax = new_axes(ax)
            sc = self.success_curve()
            ax.fill_between(sc["round"], sc["low"], sc["high"], alpha=0.25, lw=0, color="C0",
                            label=f"{self.level:.0%} band over draws")
            ax.plot(sc["round"], sc["mean"], color="C0", label=f"predicted (N = {self.n_agents})")
            if observed is not None:
                ax.plot(observed.index, np.asarray(observed, float), "o-", ms=3, color="C3", label="observed")
            ax.axhline(0.95, color="0.5", lw=0.8, ls=":")
            done = sc.loc[sc["mean"] >= 0.99, "round"]  # show the rise, not 200 rounds of 1.0
            if len(done):
                ax.set_xlim(0, min(float(sc["round"].max()), max(10.0, 1.5 * float(done.iloc[0]))))
            r95 = self.rounds_to_95()
            ax.set(xlabel="population round (N interactions)", ylabel="success rate", ylim=(-0.02, 1.02),
                   title=f"rounds to 95% success: {fmt(r95['estimate'])} {fmt_interval(r95['low'], r95['high'])}")
            ax.title.set_fontsize(9)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.legend(fontsize=8, loc="lower right")
            return ax
        ax = new_axes(ax, (7.6, 3.9))
        fc = self.flip_curve()
        cm = self.critical_mass()
        W = len(self.names)
        for k, ((x, y), g) in enumerate(fc.groupby(["majority", "challenger"], sort=False)):
            key = _key(x, y, W)
            c = f"C{k}"
            v = cm.get(key, {})
            pub, per = v.get("published", {}), v.get("per_run", {})
            ax.fill_between(g["committed"], g["low"], g["high"], color=c, alpha=0.2, lw=0)
            ax.plot(g["committed"], g["p_flip"], "-", color=c, lw=1.8,
                    label=f"{key}: P(flip), per run; critical mass {fmt(per.get('estimate'))} "
                          f"{fmt_interval(per.get('low'), per.get('high'))}")
            ax.plot(g["committed"], g["p_published"], "--", color=c, lw=1.2,
                    label=f"{key}: P(published rule met); critical mass {fmt(pub.get('estimate'))} "
                          f"{fmt_interval(pub.get('low'), pub.get('high'))}")
            if observed is not None:
                cv = observed.curves
                cv = cv[(cv["majority"] == x) & (cv["n_agents"] == self.n_agents) & (cv["memory"] == self.memory)]
                if len(cv):
                    ax.errorbar(cv["committed"], cv["p_flip"], yerr=error_bars(cv["p_flip"], cv["ci_low"], cv["ci_high"]),
                                fmt="o", color=c, mec="k", mew=0.6, capsize=3, label=f"{key}: observed runs")
        ax.axhline(self.settings.get("flip_level", FLIP_LEVEL), color="0.5", lw=0.8, ls=":")
        full = fc[(fc["low"] >= 1) & (fc["p_published"] >= 1)].groupby(["majority", "challenger"])["committed"].min()
        if len(full) == fc.groupby(["majority", "challenger"]).ngroups:  # every curve saturates: stop after it
            right = min(float(fc["committed"].max()), float(full.max()) + 2.5)
            if observed is not None:  # but show every observed count
                cv = observed.curves
                cv = cv[(cv["n_agents"] == self.n_agents) & (cv["memory"] == self.memory)]
                right = max(right, float(cv["committed"].max()) + 0.5) if len(cv) else right
            ax.set_xlim(-0.5, right)
        ax.set(xlabel="committed agents", ylabel="probability", ylim=(-0.03, 1.03),
               title=f"predicted flip curves, N = {self.n_agents}, window {self.within_rounds} rounds "
                     f"({self.level:.0%} bands over {self.n_draws} draws)")
        ax.title.set_fontsize(9)
        ax.xaxis.get_major_locator().set_params(integer=True)
        legend_outside(ax, "below", ncol=1)
        return ax

    _TABLES = ("consensus", "success", "draw_stats", "flips", "critical_mass_draws", "strength", "experiment",
               "experiment_cm", "experiment_shares")

    def save(self, path) -> "Path":
        """Write the prediction to the folder ``path`` (``result.json`` and one Parquet table per
        per-draw frame); read it back with :meth:`load` or ``normlab.load``."""
        meta = {"names": list(self.names), "memory": self.memory, "n_agents": self.n_agents,
                "n_draws": self.n_draws, "within_rounds": self.within_rounds, "level": self.level,
                "settings": self.settings, "fit_summary": self.fit_summary}
        return save_result(path, type(self), meta, {k: getattr(self, k) for k in self._TABLES})

    @classmethod
    def load(cls, path) -> "Prediction":
        """Read a prediction written by :meth:`save`."""
        meta, t = load_result(path, cls)
        return cls(names=tuple(meta["names"]), memory=int(meta["memory"]), n_agents=int(meta["n_agents"]),
                   n_draws=int(meta["n_draws"]), within_rounds=int(meta["within_rounds"]), level=float(meta["level"]),
                   settings=meta["settings"], fit_summary=meta["fit_summary"], **{k: t[k] for k in cls._TABLES if k in t})

    @classmethod
    def _contract_example(cls) -> "Prediction":
        """Two posterior draws for four agents on two names, committed counts 1-3 against each
        convention, literal per-draw tables (``tests/umbrella/test_contracts.py``)."""
        names, dirs = ("A", "B"), (("A", "B"), ("B", "A"))
        consensus = pd.DataFrame([(d, nm, r, 10) for d, rs in enumerate(((7, 3, 0), (6, 3, 1)))
                                  for nm, r in zip(("A", "B", "none"), rs)], columns=["draw", "name", "runs", "n_runs"])
        success = pd.DataFrame([(d, k + 1, min(1.0, 0.5 + 0.12 * k + 0.02 * d)) for d in (0, 1) for k in range(5)],
                               columns=["draw", "round", "success_rate"])
        draw_stats = pd.DataFrame({"draw": [0, 1], "rounds_to_95": [4.0, 5.0], "consensus_rounds": [6.5, 7.0],
                                   "converged": [1.0, 0.9]})
        flips = pd.DataFrame([(d, x, y, c, 4, min(4, c + d + (x == "B")), True, 0.9 * c, c >= 2)
                              for d in (0, 1) for x, y in dirs for c in (1, 2, 3)],
                             columns=["draw", "majority", "challenger", "committed", "n_runs", "n_flips", "simulated",
                                      "published_last3", "published_success"])
        cm = pd.DataFrame([(d, x, y, 2.0, 2.0 - d) for d in (0, 1) for x, y in dirs],
                          columns=["draw", "majority", "challenger", "published", "per_run"])
        strength = pd.DataFrame(columns=["draw", "majority", "challenger", "width", "boundary", "pull", "exploration"])
        settings = {"flip_level": 0.5, "max_round": 30, "max_rounds": 50, "n_runs_consensus": 10, "n_runs_flip": 4,
                    "design_runs": 10}
        return cls(names=names, memory=1, n_agents=4, n_draws=2, within_rounds=30, level=0.95, consensus=consensus,
                   success=success, draw_stats=draw_stats, flips=flips, critical_mass_draws=cm, strength=strength,
                   settings=settings, fit_summary={"kind": "empirical"})


# The public home of Prediction is normlab.calibration.prediction: it names the class in the type tag
# of saved results (normlab.load) and in pickles, so results saved before the split load unchanged.
Prediction.__module__ = "normlab.calibration.prediction"


def _summary_settings(settings) -> dict:
    """The settings as :meth:`Prediction.summary` shows them: a joint fit's run effects by their
    estimates and the number of posterior draws, not the draws themselves (kept in ``settings``)."""
    out = dict(settings)
    re = out.get("run_effects")
    if isinstance(re, dict) and isinstance(re.get("sample"), (list, tuple)) and len(re["sample"]):
        out["run_effects"] = {**{k: v for k, v in re.items() if k != "sample"}, "sample_draws": len(re["sample"])}
    return out
