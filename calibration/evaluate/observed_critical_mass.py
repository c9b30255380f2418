"""Empirical critical mass from committed-minority runs (LLM or simulated), by every flip criterion.

Each run that starts from a consensus on ``X`` (``initial = "consensus:X"``: the AI-norms
``swap`` and ``evolved`` files, normlab's own LLM runs, or :func:`normlab.theory.strategy_game`
logs) is turned into the challenger ``Y``'s share of the uncommitted agents' valid productions
per population round (round ``r`` = interactions ``(r - 1) N .. r N - 1``, from ``t = 0``; the
last partial round kept), and the three readings of :mod:`normlab.theory.criteria` are applied
(see the table there):

``published`` (the default wherever a number is compared with Table S3 of Flint Ashery et al. 2025)
    Per committed count, the authors' ensemble rule: mean share over runs (runs meeting the
    threshold at their own end padded with 1s), truncated at ``max_round`` (30; 21 for Llama-3 at
    N = 48), summed over its last three rounds ``>= 2.849``. The critical mass is the smallest
    tested count that succeeds. This reproduces Table S3 from the published archives: Llama-3
    (N = 48, H = 3) 6 to overturn M and 1 to overturn Q; Llama-3.1 (N = 24, H = 5) 10 and 0.
``per_run``
    A run flips when three consecutive *complete* rounds ending at a round ``<= within_rounds``
    sum to ``>= 2.849`` (first passage; a run that stopped in a consensus on ``Y`` -- a final
    streak of ``3N`` successes -- counts as flipped at its last round, as an absorbed theory run
    does). Per count: flip probability with a Clopper-Pearson interval; ``first_count`` (smallest
    tested count with flip frequency ``>= level``), and ``c50`` of a Firth logistic curve with a
    bootstrap interval. A run that neither flipped nor stopped in a consensus and has fewer than
    ``within_rounds`` complete rounds is *censored* (counted as not flipped, flagged).
``end_of_run``
    The share over the last three blocks of ``N`` interactions ending at the run's last
    interaction sums to ``>= 2.849`` (what the AI-norms loader stores as ``flipped``); a count's
    ``end_of_run`` critical mass is the smallest tested count where a fraction ``>= level`` of runs
    meet it.

The readings differ on the published data: for Llama-3.1 overturning M, ``per_run`` gives 4
(6 of 10 runs flip at some point) where the paper's ensemble rule gives 10.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods "Committed
Minorities", Fig. 3, Table S3, Fig. S7; the authors' ``plotter.ipynb`` cells 9-10
(Ariel-Flint-Ashery/AI-norms at commit e57aeef); D. Firth, Biometrika 80, 27 (1993);
C. J. Clopper, E. S. Pearson, Biometrika 26, 404 (1934).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, legend_outside, load_result, new_axes, plain, plotting, save_result, short_repr, error_bars
from normlab._rng import as_generator
from normlab._validate import check_int
from normlab.schema import GameLog
from normlab.theory.stats import firth_logistic
from normlab.theory.criteria import (FLIP_SUM, LAST_ROUNDS, check_criterion, end_of_run_sum, first_passage, per_run_curve,
                                     published_max_round, published_rule, round_shares, smallest_count)

__all__ = ["run_flips", "challenger_shares", "empirical_critical_mass", "EmpiricalCriticalMass", "firth_logistic"]



def _challenger(row, names):
    if row["committed_name"] is not None and not (isinstance(row["committed_name"], float)):
        return str(row["committed_name"])
    maj = str(row["initial"]).split(":", 1)[1]
    if len(names) == 2:
        return names[1 - names.index(maj)] if maj in names else None
    ct = row.get("committed_to")
    return None if ct is None or (isinstance(ct, float) and np.isnan(ct)) else str(ct)


def _consensus_runs(log: GameLog):
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    runs = log.runs[log.runs["initial"].astype(str).str.startswith("consensus:")]
    if runs.empty:
        raise ValueError("no run starts from a consensus (initial='consensus:<name>'); committed-minority runs needed")
    d = log.decisions[log.decisions["run"].isin(runs["run"])]
    d = d[d["valid"].to_numpy() & ~d["committed"].to_numpy()]
    return runs, {r: g for r, g in d.groupby("run")}


def _run_counts(r, g, y):
    """Per round (bins of N from t = 0, last partial kept) and per interaction: challenger
    productions and all valid productions of uncommitted agents."""
    N, T = int(r["n_agents"]), int(r["n_interactions"])
    nb = -(-T // N)
    if g is None or y is None:
        z = np.zeros(nb)
        return z, z.copy(), np.zeros(T), np.zeros(T)
    t = g["t"].to_numpy()
    keep = t < T
    t = t[keep]
    hit = (g["name"].to_numpy()[keep] == y).astype(float)
    tot_r = np.bincount(t // N, minlength=nb)[:nb].astype(float)
    hit_r = np.bincount(t // N, weights=hit, minlength=nb)[:nb]
    return hit_r, tot_r, np.bincount(t, weights=hit, minlength=T)[:T], np.bincount(t, minlength=T)[:T].astype(float)


def challenger_shares(log: GameLog) -> pd.DataFrame:
    """The challenger's share of the uncommitted agents' valid productions per run and round.

    Parameters
    ----------
    log : normlab.schema.GameLog
        Runs starting from a consensus (``initial = "consensus:<name>"``); others are ignored.

    Returns
    -------
    pandas.DataFrame
        Tidy: ``run``, ``round`` (from 1; bins of ``N`` interactions from ``t = 0``, the last
        partial bin kept), ``challenger``, ``hits``, ``productions``, ``share`` (NaN where the
        round has no uncommitted production) -- the input of :mod:`normlab.theory.criteria`.
    """
    runs, by_run = _consensus_runs(log)
    frames = []
    for _, r in runs.iterrows():
        y = _challenger(r, str(r["names"]).split(","))
        h, t, _, _ = _run_counts(r, by_run.get(r["run"]), y)
        frames.append(pd.DataFrame({"run": r["run"], "round": np.arange(1, len(h) + 1), "challenger": y,
                                    "hits": h.astype(int), "productions": t.astype(int),
                                    "share": round_shares(h, t)}))
    return pd.concat(frames, ignore_index=True)


def run_flips(log: GameLog, *, within_rounds: int = 30, flip_sum: float = FLIP_SUM) -> pd.DataFrame:
    """Classify every committed-minority (or unperturbed consensus) run by the per-run criteria.

    Parameters
    ----------
    log : normlab.schema.GameLog
        Runs starting from a consensus (``initial = "consensus:<name>"``); other runs are ignored.
    within_rounds : int, optional
        Window in population rounds of the ``per_run`` reading (30 in Flint Ashery et al. 2025, Methods).
    flip_sum : float, optional
        Threshold on the 3-round sum of the challenger's share (2.849).

    Returns
    -------
    pandas.DataFrame
        One row per run: ``run``, ``model``, ``kind``, ``n_agents``, ``memory``, ``majority``,
        ``challenger``, ``committed``, ``rounds`` (complete rounds observed), ``flipped``
        (``per_run``: first passage within the window), ``flip_round`` (NaN if not),
        ``censored``, ``final_share`` (challenger share over the last three complete rounds),
        ``end_sum`` and ``end_of_run`` (the ``end_of_run`` reading: 3-block sum ending at the last
        interaction, and whether it reaches ``flip_sum``), ``consensus`` and, when the log has
        them, the loader's ``flipped_at_end`` and ``flip_interaction``.

    Raises
    ------
    ValueError
        No run starts from a consensus; a bad window or threshold.
    """
    W_rounds = check_int(within_rounds, "within_rounds", low=LAST_ROUNDS)
    if not 0 < float(flip_sum) <= LAST_ROUNDS:
        raise ValueError(f"flip_sum must be in (0, {LAST_ROUNDS}]; got {flip_sum!r}")
    runs, by_run = _consensus_runs(log)
    rows = []
    for _, r in runs.iterrows():
        names = str(r["names"]).split(",")
        maj = str(r["initial"]).split(":", 1)[1]
        y = _challenger(r, names)
        N = int(r["n_agents"])
        n_int = int(r["n_interactions"])
        R = n_int // N  # complete rounds
        h, t, hi, ti = _run_counts(r, by_run.get(r["run"]), y)
        share = np.nan_to_num(round_shares(h, t))[:R]
        flip_round = first_passage(share, window=max(R, LAST_ROUNDS), flip_sum=flip_sum) if R >= LAST_ROUNDS else np.nan
        cons = r["consensus"]
        if np.isnan(flip_round) and cons is not None and str(cons) == y:
            flip_round = float(-(-n_int // N))
        flipped = bool(not np.isnan(flip_round) and flip_round <= W_rounds)
        stopped = cons is not None and not (isinstance(cons, float))
        censored = (not flipped) and (not stopped) and R < W_rounds
        end = end_of_run_sum(hi, ti, N)
        row = {"run": r["run"], "model": r["model"], "kind": r["kind"], "n_agents": N, "memory": int(r["memory"]),
               "majority": maj, "challenger": y, "committed": int(r["committed_count"]), "rounds": R,
               "flipped": flipped, "flip_round": flip_round if flipped else np.nan, "censored": bool(censored),
               "final_share": float(share[-3:].sum() / 3) if R >= 3 else np.nan,
               "end_sum": end, "end_of_run": bool(end >= flip_sum), "consensus": cons}
        for c in ("flipped", "flip_interaction"):
            if c in runs.columns:
                v = r[c]
                row["flipped_at_end" if c == "flipped" else c] = None if v is None or v is pd.NA else v
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class EmpiricalCriticalMass:
    """Empirical flip curves and critical masses, one direction per (majority, challenger, N, H).

    Attributes
    ----------
    curves : pandas.DataFrame
        One row per direction and committed count: ``model``, ``majority``, ``challenger``,
        ``n_agents``, ``memory``, ``committed``, ``n_runs``, ``n_flips`` (``per_run``),
        ``p_flip``, ``ci_low``, ``ci_high`` (Clopper-Pearson 95%), ``n_censored``,
        ``mean_flip_round``, ``published_last3`` (3-round sum of the ensemble mean) and
        ``published_success`` (``published``), ``n_end_of_run`` (``end_of_run``),
        ``n_flipped_at_end`` (loader column, if present).
    estimates : pandas.DataFrame
        One row per direction: ``model``, ``majority``, ``challenger``, ``n_agents``, ``memory``,
        ``published`` (smallest tested count meeting the published rule, Flint Ashery et al. 2025, Table S3;
        ``inf`` when none), ``max_round`` (its window), ``published_unobserved`` (counts whose
        runs are shorter than the window: rule not applied), ``first_count`` (``per_run``: smallest
        tested count with ``p_flip >= level``), ``first_all`` (smallest tested count where every
        run flipped), ``c50`` (logistic 50% point), ``c50_low``, ``c50_high`` (bootstrap
        interval), ``end_of_run`` (smallest tested count where a fraction ``>= level`` of runs
        met the threshold at their end), ``b0``, ``b1``, ``n_runs``, ``counts`` (tested counts),
        ``separated`` (every tested count all-flip or all-stay on one side).
    runs : pandas.DataFrame
        The per-run classification (:func:`run_flips`).
    shares : pandas.DataFrame
        Challenger share per run and round (:func:`challenger_shares`).
    within_rounds : int
    level : float

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Fig. 3, Table S3.
    """

    curves: pd.DataFrame
    estimates: pd.DataFrame
    runs: pd.DataFrame
    within_rounds: int
    level: float = 0.5
    settings: dict = field(default_factory=dict)
    shares: pd.DataFrame = None

    def _direction(self, r) -> str:
        return f"{r['model']}: {r['challenger']} overturning {r['majority']}, N={r['n_agents']}, H={r['memory']}"

    def summary(self) -> dict:
        """Per direction (``<model> N=.. H=.. overturn_<majority>``): the critical mass by the three
        criteria, with the logistic 50% point and its interval, as plain Python (``inf``: not
        reached among the tested counts)."""
        out = {}
        for _, r in self.estimates.iterrows():
            key = f"{r['model']} N={r['n_agents']} H={r['memory']} overturn_{r['majority']}"
            out[key] = {c: r[c] for c in ("published", "max_round", "first_count", "first_all", "c50", "c50_low",
                                          "c50_high", "end_of_run", "n_runs") if c in r}
            out[key]["challenger"] = r["challenger"]
        return plain({"within_rounds": self.within_rounds, "level": self.level, "directions": out})

    def __repr__(self) -> str:
        e = self.estimates
        parts = [f"{r['challenger']} overturning {r['majority']} (N={r['n_agents']}, H={r['memory']}): published "
                 f"{fmt(r['published'])}, per run {fmt(r['first_count'])}" for _, r in e.iterrows()]
        models = ", ".join(map(str, e["model"].unique())) if len(e) else ""
        return short_repr("EmpiricalCriticalMass", models, *parts, f"window {self.within_rounds} rounds",
                          f"{len(self.runs)} runs")

    def _repr_html_(self) -> str:
        rows = []
        for _, r in self.estimates.iterrows():
            d = f"{r['challenger']} overturning {r['majority']}, N = {r['n_agents']}, H = {r['memory']}"
            rows.append((f"{d}: published rule", r["published"], None, f"window {r['max_round']} rounds (Table S3)"))
            rows.append((f"{d}: first count with P(flip) >= {self.level:g}", r["first_count"], None,
                         f"within {self.within_rounds} rounds"))
            rows.append((f"{d}: logistic 50% point", r["c50"], (r["c50_low"], r["c50_high"]), "Firth fit, bootstrap"))
        models = ", ".join(map(str, self.estimates["model"].unique()))
        return html_card("EmpiricalCriticalMass", rows, subtitle=f"committed-minority runs of {models}",
                         settings={"runs": len(self.runs), "directions": len(self.estimates)},
                         note=".plot() draws the observed flip curves; .to_frame() gives one row per count.")

    @plotting
    def plot(self, *, ax=None):
        """Observed flip probability against the committed count, one series per direction,
        with Clopper-Pearson 95% intervals and the Firth logistic fit.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3B, Table S3.
        """
        ax = new_axes(ax, (7.6, 3.9))
        keys = ["model", "majority", "challenger", "n_agents", "memory"]
        for k, (key, cv) in enumerate(self.curves.groupby(keys, sort=False)):
            c = f"C{k % 10}"
            est = self.estimates
            e = est[(est[keys] == pd.Series(key, index=keys)).all(axis=1)]
            lab = f"{key[2]} overturning {key[1]} (N={key[3]}, H={key[4]})"
            if len(e):
                lab += f": published {fmt(e.iloc[0]['published'])}"
            ax.errorbar(cv["committed"], cv["p_flip"], yerr=error_bars(cv["p_flip"], cv["ci_low"], cv["ci_high"]),
                        fmt="o", color=c, capsize=3, label=lab)
            if len(e) and np.isfinite(e.iloc[0]["b1"]) and e.iloc[0]["b1"] > 0:
                xs = np.linspace(0, max(float(cv["committed"].max()), 1.0), 200)
                ax.plot(xs, 1 / (1 + np.exp(-(e.iloc[0]["b0"] + e.iloc[0]["b1"] * xs))), ":", color=c)
        ax.axhline(self.level, color="0.5", lw=0.8, ls=":")
        ax.set(xlabel="committed agents", ylabel=f"P(flip within {self.within_rounds} rounds)", ylim=(-0.03, 1.03),
               title="observed flip curves (dotted: Firth logistic fit)")
        ax.title.set_fontsize(9)
        ax.xaxis.get_major_locator().set_params(integer=True)
        legend_outside(ax, "below", ncol=1)
        return ax

    def save(self, path) -> "Path":
        """Write to the folder ``path`` (``result.json`` and the Parquet tables); read it back
        with :meth:`load` or ``normlab.load``."""
        tables = {"curves": self.curves, "estimates": self.estimates, "runs": self.runs}
        if self.shares is not None:
            tables["shares"] = self.shares
        return save_result(path, type(self), {"within_rounds": self.within_rounds, "level": self.level,
                                              "settings": self.settings}, tables)

    @classmethod
    def load(cls, path) -> "EmpiricalCriticalMass":
        """Read a result written by :meth:`save`."""
        meta, t = load_result(path, cls)
        est = t["estimates"]
        if "counts" in est:  # Parquet gives arrays back: lists, as computed
            est["counts"] = [list(v) if v is not None else None for v in est["counts"]]
        return cls(curves=t["curves"], estimates=est, runs=t["runs"], within_rounds=int(meta["within_rounds"]),
                   level=float(meta["level"]), settings=meta["settings"], shares=t.get("shares"))

    def to_frame(self) -> pd.DataFrame:
        """The flip curves (tidy)."""
        return self.curves.copy()

    def estimate(self, majority: str, *, n_agents: int | None = None, memory: int | None = None) -> dict:
        """The estimate row of one direction as a dict."""
        e = self.estimates[self.estimates["majority"] == majority]
        if n_agents is not None:
            e = e[e["n_agents"] == n_agents]
        if memory is not None:
            e = e[e["memory"] == memory]
        if len(e) != 1:
            raise ValueError(f"{len(e)} directions match majority={majority!r}, n_agents={n_agents}, memory={memory}")
        return e.iloc[0].to_dict()

    def critical_mass(self, majority: str, *, criterion: str = "published", n_agents: int | None = None,
                      memory: int | None = None) -> float:
        """The critical mass of one direction by one criterion (``published``: Table S3;
        ``per_run``: ``c50``; ``end_of_run``)."""
        col = {"published": "published", "per_run": "c50", "end_of_run": "end_of_run"}[check_criterion(criterion)]
        return float(self.estimate(majority, n_agents=n_agents, memory=memory)[col])

    @classmethod
    def _contract_example(cls) -> "EmpiricalCriticalMass":
        """One direction tested at three counts with five runs each, literal numbers
        (``tests/umbrella/test_contracts.py``)."""
        key = {"model": "toy", "majority": "A", "challenger": "B", "n_agents": 8, "memory": 2}
        k = [0, 3, 5]
        curves = pd.DataFrame([{**key, "committed": c, "n_runs": 5, "n_flips": f, "p_flip": f / 5,
                                "ci_low": max(0.0, f / 5 - 0.4), "ci_high": min(1.0, f / 5 + 0.4), "n_censored": 0,
                                "mean_flip_round": 12.0 if f else float("nan"), "published_last3": 0.95 * c,
                                "published_success": c >= 3, "n_end_of_run": f} for c, f in zip((1, 2, 3), k)])
        estimates = pd.DataFrame([{**key, "published": 3.0, "max_round": 30, "published_unobserved": 0,
                                   "first_count": 2.0, "first_all": 3.0, "c50": 1.9, "c50_low": 1.4, "c50_high": 2.5,
                                   "end_of_run": 2.0, "b0": -5.7, "b1": 3.0, "n_runs": 15, "counts": [1, 2, 3],
                                   "separated": False}])
        runs = pd.DataFrame([{"run": 5 * i + j, **key, "committed": c, "flipped": j < f}
                             for i, (c, f) in enumerate(zip((1, 2, 3), k)) for j in range(5)])
        return cls(curves=curves, estimates=estimates, runs=runs, within_rounds=30)


def empirical_critical_mass(log: GameLog, *, within_rounds: int = 30, max_round: int | None = None,
                            level: float = 0.5, n_boot: int = 2000, include_evolved: bool = True,
                            strict_window: bool = False, rng=None) -> EmpiricalCriticalMass:
    """Flip curves and critical masses of committed-minority runs by the three criteria.

    Parameters
    ----------
    log : normlab.schema.GameLog
        Runs starting from a consensus (AI-norms ``swap``/``evolved`` files, normlab LLM runs,
        or simulations). Directions are grouped by model, majority, challenger, N and H.
    within_rounds : int, optional
        Window of the ``per_run`` reading in population rounds (30, Flint Ashery et al. 2025, Methods).
    max_round : int, optional
        Window of the ``published`` rule; default the authors' (:func:`~normlab.theory.criteria.
        published_max_round`: 30, 21 for Llama-3 at N = 48).
    level : float, optional
        Flip probability defining the ``per_run`` and ``end_of_run`` critical masses (0.5).
    n_boot : int, optional
        Bootstrap replicates of the logistic fit (0 to skip).
    include_evolved : bool, optional
        Count unperturbed consensus runs (``evolved``: nobody committed) as committed count 0.
    strict_window : bool, optional
        Raise when the ``published`` window is longer than the runs of some count (by default
        such a count gets ``published_success = NA`` and is listed in the estimate's
        ``published_unobserved``; the critical mass is the smallest count that succeeds).
    rng : optional

    Returns
    -------
    EmpiricalCriticalMass

    Raises
    ------
    ValueError
        Bad settings; no committed-minority run; with ``strict_window``, a ``published`` window
        longer than the runs of some count.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods "Committed
    Minorities", Fig. 3, Table S3; the authors' ``plotter.ipynb`` cells 9-10; Firth,
    Biometrika 80, 27 (1993).
    """
    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be an int >= 0; got {n_boot!r}")
    if max_round is not None:
        check_int(max_round, "max_round", low=LAST_ROUNDS)
    rf = run_flips(log, within_rounds=within_rounds)
    if not include_evolved:
        rf = rf[rf["kind"] != "evolved"]
    if rf.empty:
        raise ValueError("no committed-minority run to analyse")
    sh = challenger_shares(log)
    sh = sh[sh["run"].isin(rf["run"])]
    traj = {r: g["share"].to_numpy() for r, g in sh.groupby("run")}
    g = as_generator(rng)
    curves, ests = [], []
    keys = ["model", "majority", "challenger", "n_agents", "memory"]
    for key, grp in rf.groupby(keys, sort=True):
        kd = dict(zip(keys, key))
        mr = published_max_round(kd["model"], kd["n_agents"]) if max_round is None else int(max_round)
        c = grp.groupby("committed").agg(
            n_runs=("flipped", "size"), n_flips=("flipped", "sum"), n_censored=("censored", "sum"),
            mean_flip_round=("flip_round", "mean"), n_end_of_run=("end_of_run", "sum"),
        ).reset_index()
        if "flipped_at_end" in grp.columns:
            c["n_flipped_at_end"] = grp.groupby("committed")["flipped_at_end"].apply(
                lambda s: int(np.nansum(pd.to_numeric(s, errors="coerce")))).to_numpy()
        pub, unobserved = [], []
        for cc, gc in grp.groupby("committed"):
            trs = [traj.get(r, np.zeros(0)) for r in gc["run"]]
            try:
                pub.append(published_rule(trs, max_round=mr))
            except ValueError as err:
                if strict_window:
                    raise ValueError(f"{kd['model']} {kd['majority']}<-{kd['challenger']} N={kd['n_agents']} "
                                     f"H={kd['memory']}, {cc} committed: {err}") from None
                # the window is longer than these runs (e.g. 1000-interaction runs at N = 48 with
                # max_round = 30): the rule cannot be applied; reported, not guessed
                pub.append({"last3": np.nan, "success": pd.NA})
                unobserved.append(int(cc))
        c["published_last3"] = [p["last3"] for p in pub]
        c["published_success"] = pd.array([p["success"] for p in pub], dtype="boolean")
        x = c["committed"].to_numpy(float)
        k = c["n_flips"].to_numpy(float)
        n = c["n_runs"].to_numpy(float)
        pr = per_run_curve(x, k, n, level=level, n_boot=int(n_boot), rng=g)
        c["p_flip"], c["ci_low"], c["ci_high"] = pr["p_flip"], pr["ci_low"], pr["ci_high"]
        for kk, v in kd.items():
            c[kk] = v
        curves.append(c)
        ests.append({**kd,
                     "published": smallest_count(x, c["published_success"].fillna(False).to_numpy(bool)),
                     "max_round": mr, "published_unobserved": unobserved,
                     "first_count": pr["first_count"], "first_all": pr["first_all"],
                     "c50": pr["c50"], "c50_low": pr["c50_low"], "c50_high": pr["c50_high"],
                     "end_of_run": smallest_count(x, c["n_end_of_run"].to_numpy(float) / n >= level),
                     "b0": pr["b0"], "b1": pr["b1"], "n_runs": int(n.sum()), "counts": [int(v) for v in x],
                     "separated": pr["separated"]})
    cols = keys + ["committed", "n_runs", "n_flips", "p_flip", "ci_low", "ci_high", "n_censored", "mean_flip_round",
                   "published_last3", "published_success", "n_end_of_run"]
    curves = pd.concat(curves, ignore_index=True)
    curves = curves[cols + [c for c in curves.columns if c not in cols]]
    return EmpiricalCriticalMass(curves=curves, estimates=pd.DataFrame(ests), runs=rf,
                                 within_rounds=int(within_rounds), level=float(level), shares=sh.reset_index(drop=True),
                                 settings={"n_boot": int(n_boot), "include_evolved": bool(include_evolved),
                                           "flip_sum": FLIP_SUM, "max_round": max_round,
                                           "criteria": {"published": "ensemble mean over runs, last 3 rounds of "
                                                                     "max_round (plotter.ipynb cells 9-10)",
                                                        "per_run": "first passage at a complete round within the window",
                                                        "end_of_run": "last 3N interactions of each run"}})


# The type tag of saved results (normlab.load) and pickles name EmpiricalCriticalMass by its path before the regroup into
# sub-packages (issue 30), which still imports it: folders saved before and after load alike.
EmpiricalCriticalMass.__module__ = "normlab.calibration.observed_critical_mass"
