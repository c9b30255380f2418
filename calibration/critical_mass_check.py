"""Predicted against published critical masses, model by model: the check behind README's table.

For every LLM of a log that holds committed-minority runs, the setting (pool, memory H, N) with
the most such runs is calibrated on the LLM's *baseline* runs only (:func:`calibrate`: the
strategy fit, its run effects, and the critical masses on the design of the committed runs),
and each direction's predicted critical mass is set beside the value the published rule reads
from the committed runs (Table S3 of Flint Ashery et al. 2025). Reported per direction: the
estimate, its 95% interval, whether the published value lies inside, the width, the error, and
the critical masses the rivals' forecasts imply on the tested counts (the direction rule, the
committed-fraction logistic); per model, counted by what they are, the observed flip frequencies
and critical masses inside their experiment intervals (with the share of zero-width intervals:
a flip frequency of 0 or 1 predicted at exactly 0 or 1 is "inside" without saying much) and the
Brier scores of the committed runs' flips beside the rivals' on the same runs
(:func:`~normlab.calibration.score`); and over all directions the summary the issue's goal is
stated in (every value inside, widths, mean error).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table S3, Fig. 3,
Methods ("Committed minorities").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, plain, short_repr
from normlab._rng import seeded
from normlab.schema import GameLog

from .pipeline import calibrate

__all__ = ["CriticalMassCheck", "check_critical_masses", "committed_settings"]


def committed_settings(log: GameLog) -> pd.DataFrame:
    """Per LLM the setting with the most committed-minority runs: ``model``, ``names`` (the pool,
    sorted), ``memory``, ``n_agents``, ``runs``."""
    r = log.runs
    committed = r[(r["committed_count"] > 0) & r["initial"].astype(str).str.startswith("consensus:")].copy()
    if committed.empty:
        return pd.DataFrame(columns=["model", "names", "memory", "n_agents", "runs"])
    committed["pool"] = committed["names"].map(lambda s: ",".join(sorted(str(s).split(","))))
    g = committed.groupby(["model", "pool", "memory", "n_agents"]).size().reset_index(name="runs")
    g = g[g["pool"].str.count(",") == 1]
    best = g.sort_values("runs", ascending=False).drop_duplicates("model").sort_values("model")
    return best.rename(columns={"pool": "names"}).reset_index(drop=True)


@dataclass(frozen=True)
class CriticalMassCheck:
    """Predicted (from baseline runs only) against published critical masses.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per model and direction: ``model``, ``n_agents``, ``memory``, ``direction``,
        ``published`` (the rule on the committed runs), ``estimate``, ``low``, ``high``,
        ``inside``, ``width``, ``error``, ``design`` (the tested counts), ``paper_estimate``,
        ``paper_low``, ``paper_high`` (the paper's design), ``thin_share``, and the critical masses
        of the rivals read on the tested counts: ``direction_rule_cm`` (the smallest tested count the
        direction rule says flips: the first for the weak convention, "not reached" -- inf -- for the
        strong one) and ``logistic_cm`` (the smallest tested count where the committed-fraction
        logistic's P(flip) >= 0.95, per run the analogue of the rule's 2.849 of 3).
    models : pandas.DataFrame
        One row per model, counts by what they count: ``flip_inside`` of ``flip_rows`` observed flip
        frequencies (one per tested count and direction) inside their experiment intervals,
        ``flip_zero_width`` (share of those intervals that are one value), ``flip_inside_other``
        of ``flip_rows_other`` (the rows whose interval is not zero-width), ``cm_inside`` of
        ``cm_rows`` observed critical masses (published rule and per-run reading) inside theirs;
        ``brier`` (normlab's Brier score of the committed runs' flips) beside its rivals' on the
        same runs, ``brier_direction_rule``, ``brier_logistic``, ``brier_coin``;
        ``run_effects_sd_b``, ``seconds``; and ``coverage``, ``n_coverage`` (the share over every
        row, flips and critical masses together, as before issue 32).
    settings : dict
    """

    table: pd.DataFrame
    models: pd.DataFrame
    settings: dict = field(default_factory=dict)

    def summary(self) -> dict:
        t = self.table
        ok = t["published"].notna()
        return plain({"directions": int(len(t)), "inside": int(t.loc[ok, "inside"].sum()),
                      "mean_width": float(t["width"].mean()), "max_width": float(t["width"].max()),
                      "mean_error": float(t.loc[ok, "error"].mean()),
                      "coverage": {r["model"]: r["coverage"] for _, r in self.models.iterrows()},
                      "rows": t.to_dict(orient="records"), "settings": self.settings})

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def text(self) -> str:
        """README's table: one line per direction (with the rivals' critical masses), then the summary
        and per model the rows counted by what they are, the zero-width share and the Brier scores
        beside the rivals'."""
        def cm(v):
            return "not reached" if v is None or (isinstance(v, float) and np.isinf(v)) else fmt(v)

        lines = ["| model (N, H) | direction | published | predicted [95%] (the data's design) | inside | width | "
                 "paper's design | direction rule | logistic | on barely seen states |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in self.table.iterrows():
            lines.append(f"| {r['model']} ({r['n_agents']}, {r['memory']}) | {r['direction']} | {fmt(r['published'])} | "
                         f"{fmt(r['estimate'])} [{fmt(r['low'])}, {fmt(r['high'])}] | {'yes' if r['inside'] else 'NO'} | "
                         f"{fmt(r['width'])} | {fmt(r['paper_estimate'])} [{fmt(r['paper_low'])}, "
                         f"{fmt(r['paper_high'])}] | {cm(r.get('direction_rule_cm'))} | {cm(r.get('logistic_cm'))} | "
                         f"{'-' if pd.isna(r['thin_share']) else f'{r.thin_share:.0%}'} |")
        s = self.summary()
        lines.append("")
        lines.append(f"{s['inside']} of {s['directions']} published critical masses inside their 95% intervals; "
                     f"width mean {fmt(s['mean_width'])}, max {fmt(s['max_width'])}; mean |estimate - published| "
                     f"{fmt(s['mean_error'])}")
        for _, r in self.models.iterrows():
            lines.append(model_line(r))
        return "\n".join(lines)

    def __repr__(self) -> str:
        s = self.summary()
        return short_repr("CriticalMassCheck", f"{s['inside']}/{s['directions']} inside",
                          f"mean width {fmt(s['mean_width'])}", f"mean error {fmt(s['mean_error'])}")

    def _repr_html_(self) -> str:
        rows = [(f"{r['model']} {r['direction']}", r["estimate"], (r["low"], r["high"]),
                 f"published {fmt(r['published'])}") for _, r in self.table.iterrows()]
        return html_card("CriticalMassCheck", rows, subtitle="predicted from baseline runs vs published")

    @classmethod
    def _contract_example(cls) -> "CriticalMassCheck":
        """One model's two directions, literal numbers (``tests/umbrella/test_contracts.py``)."""
        table = pd.DataFrame([("toy", 24, 5, "overturn_A", 6.0, 6.0, 4.0, 9.0, True, 5.0, 0.0, "[2, 4, 6, 8]", 6.0, 4.0,
                               10.0, 0.1),
                              ("toy", 24, 5, "overturn_B", 9.0, 7.0, 5.0, 8.0, False, 3.0, 2.0, "[2, 4, 6, 8]", 7.0, 5.0,
                               9.0, 0.3)],
                             columns=["model", "n_agents", "memory", "direction", "published", "estimate", "low", "high",
                                      "inside", "width", "error", "design", "paper_estimate", "paper_low", "paper_high",
                                      "thin_share"])
        models = pd.DataFrame({"model": ["toy"], "coverage": [0.9], "n_coverage": [20], "brier": [0.2],
                               "run_effects_sd_b": [0.3], "seconds": [1.0]})
        return cls(table=table, models=models, settings={"n_draws": 200})


def model_line(r) -> str:
    """One model's line under the table: each kind of row counted as what it is."""
    def n(v):
        return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else str(int(v))

    zw = r.get("flip_zero_width")
    other = (f"; {n(r.get('flip_inside_other'))} of {n(r.get('flip_rows_other'))} among the others"
             if r.get("flip_rows_other") else "")
    zws = "-" if zw is None or (isinstance(zw, float) and np.isnan(zw)) else f"{zw:.2f}"
    return (f"{r['model']}: flip frequencies inside their experiment intervals: {n(r.get('flip_inside'))} of "
            f"{n(r.get('flip_rows'))} (zero-width {zws}{other}); critical-mass rows {n(r.get('cm_inside'))} of "
            f"{n(r.get('cm_rows'))}; Brier {fmt(r.get('brier'))} (direction rule {fmt(r.get('brier_direction_rule'))}, "
            f"logistic {fmt(r.get('brier_logistic'))}, coin {fmt(r.get('brier_coin'))})")


def _coverage_counts(scores) -> dict:
    """From a :class:`~normlab.calibration.Scores`: the experiment-interval rows counted by quantity."""
    out = {k: None for k in ("flip_inside", "flip_rows", "flip_zero_width", "flip_inside_other", "flip_rows_other",
                             "cm_inside", "cm_rows")}
    if scores is None or scores.coverage is None or scores.coverage.empty:
        return out
    cv = scores.coverage[scores.coverage["interval"] == "experiment"]
    fl = cv[cv["quantity"] == "flip_fraction"]
    cmr = cv[cv["quantity"].astype(str).str.startswith("critical_mass")]
    zw = (fl["low"] == fl["high"]).to_numpy(bool)
    cov = fl["covered"].to_numpy(bool)
    out.update(flip_inside=int(cov.sum()), flip_rows=int(len(fl)), flip_zero_width=float(zw.mean()) if len(fl) else None,
               flip_inside_other=int(cov[~zw].sum()), flip_rows_other=int((~zw).sum()),
               cm_inside=int(cmr["covered"].to_numpy(bool).sum()), cm_rows=int(len(cmr)))
    return out


def _rival_critical_masses(scores, key: str, counts) -> dict:
    """The critical masses the rivals' flip forecasts imply on the tested ``counts`` of a direction."""
    out = {"direction_rule_cm": None, "logistic_cm": None}
    if scores is None or not counts:
        return out
    fc = scores.forecasts()
    x = key.split("_", 1)[1]
    f = fc[(fc["target"] == "flip") & (fc["majority"].astype(str) == x)]
    for name, col, thr in (("direction_rule", "direction_rule_cm", 0.5), ("logistic", "logistic_cm", 0.95)):
        g = f[f["forecaster"] == name].groupby("committed")["p_event"].mean()
        if g.empty:
            continue
        hit = [c for c in sorted(counts) if c in g.index and g[c] >= thr]
        out[col] = float(hit[0]) if hit else float("inf")
    return out


def check_critical_masses(log: GameLog, *, n_draws: int = 200, model: str = "hierarchical", fits=None,
                          sensitivity: bool = True, fit_kwargs: dict | None = None, source: str | None = None,
                          rng=None) -> CriticalMassCheck:
    """Calibrate every LLM of ``log`` on its baseline runs and compare its critical masses with the published ones.

    Parameters
    ----------
    log : normlab.schema.GameLog
        E.g. one or several AI-norms archives (:func:`normlab.llm_runs.load_ainorms`).
    n_draws : int, optional
    model : str, optional
        Fit kind.
    fits : dict, optional
        ``model name -> StrategyFit`` to use instead of fitting (e.g. the shipped fits, which are
        these baseline fits: fast); run effects are estimated from the log when the fit has none.
    sensitivity : bool, optional
        Also report the share of each prediction resting on barely seen states.
    fit_kwargs : dict, optional
    source : str, optional
    rng : optional

    Returns
    -------
    CriticalMassCheck

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table S3.
    """
    settings = committed_settings(log)
    if settings.empty:
        raise ValueError("the log holds no committed-minority runs of a two-name pool to check against")
    rows, mrows = [], []
    root, rng_record = seeded(rng)
    for (_, s), ss in zip(settings.iterrows(), root.spawn(len(settings))):
        names = tuple(s["names"].split(","))
        fk = dict(fit_kwargs or {})
        cal = calibrate(log, names=names, memory=int(s["memory"]), n_agents=int(s["n_agents"]), llm=s["model"],
                        fit_on="baseline", model=model, n_draws=n_draws, fit_kwargs=fk, source=source,
                        sensitivity=sensitivity, rng=ss, fit=(fits or {}).get(s["model"]))
        summ = cal.summary()
        obs = (summ.get("observed") or {}).get("critical_mass") or {}
        for key, v in summ["critical_mass"].items():
            pub = ((obs.get(key) or {}).get("published") or {}).get("estimate")
            e = v.get("experiment") or v
            est, lo, hi = e.get("estimate"), e.get("low"), e.get("high")
            inside = pub is not None and lo is not None and hi is not None and lo <= pub <= hi
            ds = (summ.get("decisive_states") or {}).get(key) or {}
            counts = list((e.get("design") or {}).get("counts") or [])
            rows.append({"model": s["model"], "n_agents": int(s["n_agents"]), "memory": int(s["memory"]),
                         "direction": key, "published": pub, "estimate": est, "low": lo, "high": hi,
                         "inside": bool(inside), "width": None if lo is None or hi is None else hi - lo,
                         "error": None if pub is None or est is None else abs(est - pub),
                         "design": ",".join(map(str, counts)),
                         "paper_estimate": v["published"]["estimate"], "paper_low": v["published"]["low"],
                         "paper_high": v["published"]["high"], "thin_share": ds.get("thin_share"),
                         **_rival_critical_masses(cal.scores, key, counts)})
        sc = summ.get("scores") or {}
        cov = sc.get("coverage") or {}
        riv = sc.get("rivals") or {}
        mrows.append({"model": s["model"], **_coverage_counts(cal.scores), "brier": sc.get("brier_flip"),
                      "brier_direction_rule": (riv.get("direction_rule") or {}).get("brier_flip"),
                      "brier_logistic": (riv.get("logistic") or {}).get("brier_flip"),
                      "brier_coin": (riv.get("coin") or {}).get("brier_flip"),
                      "coverage": cov.get("experiment"), "n_coverage": cov.get("n_experiment"),
                      "run_effects_sd_b": ((summ.get("run_effects") or {}).get("sd_b") or {}).get("estimate"),
                      "seconds": summ.get("seconds")})
    return CriticalMassCheck(table=pd.DataFrame(rows), models=pd.DataFrame(mrows),
                             settings={"n_draws": n_draws, "model": model, "source": source,
                                       "fits": "given" if fits else "fitted on the baseline runs", "rng": rng_record})
