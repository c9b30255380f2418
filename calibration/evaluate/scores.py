"""Score a prediction against observed runs: proper scoring rules, interval coverage, reliability.

A :class:`~normlab.calibration.Prediction` gives, per posterior draw, how many simulated runs
flipped at each committed count and how many runs converged on each name.
:func:`score` turns these into the predictive probability of what each *observed* run did and
scores it:

Flips per committed count (committed-minority runs; ``per_run`` reading of
:mod:`normlab.theory.criteria`: first passage within the prediction's ``within_rounds``)
    The predicted per-run flip probability at count ``c`` is ``p = (k + 1/2) / (n + 1)`` with
    ``k`` flips among the ``n`` runs simulated at ``c`` over all draws (the posterior predictive,
    read from a finite simulation with the Krichevsky-Trofimov correction, so that it is never
    0 or 1). Each observed run scores the **Brier score** ``(p - y) ** 2`` and the **log score**
    ``-ln(p)`` if it flipped, ``-ln(1 - p)`` if not (``y`` = 1 if it flipped). A run too short to
    tell (censored: neither flipped nor stopped, fewer complete rounds than the window) is left
    out and counted.
Consensus winners (runs from empty memories)
    Outcomes are the names and ``"none"`` (no convergence within the run); ``p_j = (k_j + 1/2) /
    (n + K/2)`` over ``K = W + 1`` outcomes. Brier score ``sum_j (p_j - 1[j observed]) ** 2``
    (Brier's original multi-category score, in [0, 2]); log score ``-ln p_observed``.

Both scores are negatively oriented (lower is better) and proper. For reference, a forecast that
gives every outcome the same probability (the coin) scores Brier 0.25 and log ``ln 2 = 0.693`` on
flips, and ``1 - 1/K`` and ``ln K`` on consensus winners (``reference`` in :meth:`Scores.summary`).

Beside its rivals -- every score is computed, on the same runs, for the forecasts that need no
strategy table (:mod:`normlab.calibration.evaluate.rivals`): the **direction rule** (the convention the
fit's runs converged to holds, the other flips: the challenger's base rate among the fit runs'
winners), the **committed-fraction logistic** (four parameters, trained on another LLM's
committed runs, else leave-one-run-out), the **base rate** of the fit runs' winners for
consensus winners, and the coin. :meth:`Scores.comparison` gives them per direction (the
strong convention, that the fit runs converged to, and the weak one) with paired differences;
``rival_wins`` in :meth:`Scores.summary` says in words where a rival scores better than normlab.

Interval coverage -- two intervals, because they answer different questions
    A draw's flip (or consensus) probability is known only through its ``n`` simulated runs, so
    the spread of the per-draw probabilities over the posterior is summarised by a beta
    distribution with their mean and their between-draw variance -- estimated in a beta-binomial
    model of the per-draw counts (uniform prior on the spread's sd, its posterior mean), plus the
    Monte Carlo variance of the pooled mean; where every draw saw no event (or only events), with
    the mean integrated too, under Jeffreys' prior (:func:`beta_summary`).
    **underlying**: the credible interval of that beta distribution: what the probability itself
    is.
    **experiment**: the interval of the beta-binomial of ``n_obs`` runs: what an experiment *of
    the observed size* would report, the one an observed value should fall in 95 % of the time. A 5-run experiment can read 0 % or 100 %
    where the underlying probability is 30-70 %: the underlying interval then "misses" a
    perfectly predicted observation, the experiment interval does not.
    An observed fraction ``k / n_obs`` counts as inside an underlying interval ``[lo, hi]`` when
    it is the fraction of ``n_obs`` runs nearest to some point of it (``round(lo n_obs) <= k <=
    round(hi n_obs)``): an experiment reads a probability only to that resolution.
    Beside every coverage stands the share of zero-width rows (``low == high``: for a flip
    fraction or a winner's share an interval at exactly 0 or 1, which a prediction near
    certainty earns and an observation meets or misses outright) and the coverage of the other
    rows; flip fractions and winner shares are also checked against the binomial interval of an
    ``n_obs``-run experiment at each rival's probability (:attr:`Scores.rival_coverage`).
    Quantities: flip fraction per count; P(consensus) per name; critical mass at the observed
    counts by the ``published`` rule (the draw's simulated replication of the paper's design,
    ``design_runs`` runs per count: an experiment interval) and by the ``per_run`` rule (first
    tested count with half the runs flipped: underlying from the draws' probabilities with their
    Monte Carlo noise removed (:func:`denoised_probabilities`), experiment by drawing ``n_obs``
    runs per count from them); rounds to 95 % success (the draws'
    ``n_runs_consensus``-run experiments). ``n_sim`` (runs simulated per draw) and ``n_obs``
    stand beside every interval: an experiment interval describes an experiment of ``n_obs``
    runs only where it was built for that size.

References
----------
G. W. Brier, Monthly Weather Review 78, 1 (1950); T. Gneiting, A. E. Raftery, JASA 102, 359
(2007) (proper scoring rules); R. Krichevsky, V. Trofimov, IEEE Trans. Inf. Theory 27, 199
(1981); D. Firth, Biometrika 80, 27 (1993); A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv.
11, eadu9368 (2025): Fig. 2, Fig. 3, Table S3, Methods "Committed Minorities".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import plotting, error_bars
from normlab._validate import check_int
from normlab.schema import GameLog

from ..prediction.result import Prediction
from .coverage import (_consensus_coverage, _consensus_rows, _coverage_block, _flip_coverage, _flip_rows,
                       _fraction_coverage_summary, _groups, _matching, _published_observed, _rounds_coverage,
                       summarize_coverage)
from .rivals import (RIVAL_LABELS, RIVALS, base_rate, committed_flips, fit_fraction_logistic, leave_one_run_out,
                     winner_counts)
# The proper scores and intervals live in scoring_rules.py, the coverage in coverage.py (split from this
# module, issue 30); the names callers import from here (normlab.calibration.scoring) are re-exported.
from .scoring_rules import (NONE, RELIABILITY_BINS, _binomial_interval, _covers_at_resolution, _digits,  # noqa: F401
                            _distinct, _reliability, beta_summary, brier_binary, brier_categorical,
                            denoised_probabilities, experiment_interval, kt_probability, log_score_binary,
                            log_score_categorical)

__all__ = ["Scores", "score", "rival_wins", "compare_forecasts", "summarize_coverage", "brier_binary", "log_score_binary", "brier_categorical", "log_score_categorical",
           "kt_probability", "beta_summary", "denoised_probabilities", "experiment_interval"]


# ----------------------------------------------------------------------------- beside the rivals
_RIVAL_COLUMNS = ["run", "target", "majority", "committed", "observed", "forecaster", "p_event", "p_observed", "brier",
                  "log_score"]
_RIVAL_COVERAGE_COLUMNS = ["quantity", "key", "committed", "observed", "n_obs", "forecaster", "low", "high",
                           "zero_width", "covered"]


def compare_forecasts(forecasts: pd.DataFrame, *, strong=None) -> pd.DataFrame:
    """Mean scores of each forecaster per group of runs, with paired differences to normlab.

    Parameters
    ----------
    forecasts : pandas.DataFrame
        :meth:`Scores.forecasts` (several of them concatenated with a ``source`` column: rows
        are paired on ``source`` and ``run``).
    strong : str, optional
        The strong convention (the name the fit runs converged to): labels the directions.

    Returns
    -------
    pandas.DataFrame
        The columns of :meth:`Scores.comparison`.
    """
    keys = [c for c in ("source", "run") if c in forecasts.columns]
    rows = []
    for tgt, majority, g in _groups(forecasts):
        own = g[g["forecaster"] == "normlab"].set_index(keys)
        for name in ("normlab",) + RIVALS:
            h = g[g["forecaster"] == name]
            if h.empty:
                continue
            h = h.set_index(keys)
            row = {"target": tgt, "majority": majority,
                   "convention": (None if majority == "all" or strong is None else
                                  ("strong" if majority == strong else "weak")),
                   "forecaster": name, "n": int(len(h)), "brier": float(h["brier"].mean()),
                   "log_score": float(h["log_score"].mean())}
            for m, key in (("brier", "brier_diff"), ("log_score", "log_diff")):
                if name == "normlab" or own.empty:
                    row[key], row[key + "_se"] = np.nan, np.nan
                    continue
                d = (h[m] - own[m].reindex(h.index)).to_numpy(float)
                row[key] = float(d.mean())
                row[key + "_se"] = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else np.nan
            rows.append(row)
    return pd.DataFrame(rows, columns=["target", "majority", "convention", "forecaster", "n", "brier", "log_score",
                                       "brier_diff", "brier_diff_se", "log_diff", "log_diff_se"])


def _what(target: str, majority: str, convention) -> str:
    if target == "consensus":
        return "consensus winners"
    if majority == "all":
        return "flips (all directions)"
    conv = f", the {convention} convention" if isinstance(convention, str) else ""
    return f"flips of a consensus on {majority}{conv}"


def rival_wins(comparison: pd.DataFrame, *, where: str = "") -> list:
    """Plain sentences, one per group of runs, score and rival that scores better than normlab.

    Parameters
    ----------
    comparison : pandas.DataFrame
        :meth:`Scores.comparison` (or the same columns pooled over several scores, with
        ``where`` naming the group, e.g. a transfer relation).
    where : str, optional
        Prefix of each sentence.

    Returns
    -------
    list of str
        One per group of runs and rival, naming each score it wins on, e.g.
        ``"committed-fraction logistic beats normlab on flips of a consensus on M, the strong
        convention, 67 runs: Brier 0.150 vs 0.182 (paired difference -0.032 +/- 0.020 s.e.)"``.
    """
    out = []
    for (tgt, maj), g in comparison.groupby(["target", "majority"], sort=False):
        own = g[g["forecaster"] == "normlab"]
        if own.empty:
            continue
        o = own.iloc[0]
        for _, r in g[g["forecaster"] != "normlab"].iterrows():
            bits = []
            for m, lab, diff in (("brier", "Brier", "brier_diff"), ("log_score", "log score", "log_diff")):
                if np.isfinite(r[m]) and r[m] < o[m]:
                    a, b = _distinct(r[m], o[m])
                    se = r.get(f"{diff}_se", np.nan)
                    tail = (f" (paired difference {r[diff]:+.{_digits(r[diff], se)}f} +/- "
                            f"{se:.{_digits(r[diff], se)}f} s.e.)" if np.isfinite(r.get(diff, np.nan))
                            and np.isfinite(se) else "")
                    bits.append(f"{lab} {a} vs {b}{tail}")
            if bits:
                out.append(f"{where}{RIVAL_LABELS.get(r['forecaster'], r['forecaster'])} beats normlab on "
                           f"{_what(tgt, maj, r['convention'])}, {int(r['n'])} runs: " + "; ".join(bits))
    return out


def _rival_forecasts(rows: pd.DataFrame, sub: GameLog, log: GameLog, prediction, exclude):
    """The rivals' forecasts of the scored runs and how each was made."""
    names = list(prediction.names)
    cats = names + [NONE]
    fit_ids = sorted(int(r) for r in (exclude if exclude is not None else []))
    counts = winner_counts(log, fit_ids, cats)
    n_src = sum(counts.values())
    info = {}
    base = None
    if n_src:
        base = base_rate(counts)
        ranked = sorted(names, key=lambda nm: -counts[nm])
        strong = ranked[0] if counts[ranked[0]] > (counts[ranked[1]] if len(ranked) > 1 else -1) else None
        info["strong"] = strong
        how = (f"winners of the {n_src} fit runs from empty memories ("
               + ", ".join(f"{k} {v}" for k, v in counts.items()) + "), Krichevsky-Trofimov over "
               + f"{len(cats)} outcomes")
        info["direction_rule"] = {"how": "P(flip) = base rate of the challenger: " + how, "winners": counts}
        info["base_rate"] = {"how": how, "p": {k: float(v) for k, v in base.items()}}
    else:
        info["strong"] = None
        why = "no fit run from empty memories among the excluded runs (exclude=): no base rate to use"
        info["direction_rule"] = {"how": None, "unavailable": why}
        info["base_rate"] = {"how": None, "unavailable": why}
    out = []

    def add(r, name, p_event, p_obs, brier, logs):
        out.append({"run": int(r["run"]), "target": r["target"], "majority": r["majority"],
                    "committed": r["committed"], "observed": r["observed"], "forecaster": name, "p_event": p_event,
                    "p_observed": p_obs, "brier": brier, "log_score": logs})

    fl = rows[rows["target"] == "flip"] if len(rows) else rows
    if len(fl):
        y = fl["observed"].to_numpy(int)
        maj = fl["majority"].astype(str).to_numpy()
        frac = fl["committed"].to_numpy(float) / float(prediction.n_agents)
        scored_models = sorted(map(str, sub.runs["model"].unique()))
        train = committed_flips(log, names, within_rounds=prediction.within_rounds, exclude_models=scored_models)
        if len(train):
            lg = fit_fraction_logistic(train["majority"], train["fraction"], train["flipped"])
            p_log = lg.p(maj, frac)
            models = sorted(map(str, train["model"].unique()))
            missing = sorted(set(maj) - set(lg.coef))
            info["logistic"] = {"how": f"Firth logistic per direction on committed fraction, trained on "
                                       f"{len(train)} committed runs of another LLM ({', '.join(models)})"
                                       + (f"; no training run with a {', '.join(missing)} majority: 1/2"
                                          if missing else ""),
                                "trained_on": "other LLM", "models": models, **lg.summary()}
        else:
            p_log = leave_one_run_out(maj, frac, y.astype(bool))
            info["logistic"] = {"how": f"Firth logistic per direction on committed fraction, leave-one-run-out "
                                       f"over the {len(fl)} scored runs (the log holds no other LLM's "
                                       f"committed runs)", "trained_on": "leave one run out",
                                **fit_fraction_logistic(maj, frac, y.astype(bool)).summary()}
        for i, (_, r) in enumerate(fl.iterrows()):
            preds = [("logistic", float(p_log[i])), ("coin", 0.5)]
            if base is not None:
                preds.insert(0, ("direction_rule", float(base[str(r["challenger"])] if str(r["challenger"]) in base
                                                         else base[NONE])))
            for name, p in preds:
                yy = bool(y[i])
                add(r, name, p, p if yy else 1.0 - p, float(brier_binary(p, yy)), float(log_score_binary(p, yy)))
    cr = rows[rows["target"] == "consensus"] if len(rows) else rows
    if len(cr):
        uni = np.full(len(cats), 1.0 / len(cats))
        pb = None if base is None else np.array([base[c] for c in cats])
        for _, r in cr.iterrows():
            j = cats.index(r["observed"])
            if pb is not None:
                add(r, "base_rate", np.nan, float(pb[j]), brier_categorical(pb, j), log_score_categorical(pb, j))
            add(r, "coin", np.nan, float(uni[j]), brier_categorical(uni, j), log_score_categorical(uni, j))
    info["coin"] = {"how": "every outcome equally likely"}
    return pd.DataFrame(out, columns=_RIVAL_COLUMNS), info


def _rival_coverage(coverage: pd.DataFrame, rivals: pd.DataFrame, info: dict, level: float) -> pd.DataFrame:
    """Flip fractions and winner shares inside each forecaster's experiment interval."""
    out = []
    cv = coverage[(coverage["interval"] == "experiment") & coverage["quantity"].isin(["flip_fraction", "p_consensus"])]
    for _, c in cv.iterrows():
        n_obs = int(c["n_obs"])
        k_obs = int(round(float(c["observed"]) * n_obs))
        base = {"quantity": c["quantity"], "key": c["key"], "committed": c["committed"], "observed": c["observed"],
                "n_obs": n_obs}
        out.append({**base, "forecaster": "normlab", "low": c["low"], "high": c["high"],
                    "zero_width": bool(c["low"] == c["high"]), "covered": bool(c["covered"])})
        if c["quantity"] == "flip_fraction":
            x = str(c["key"]).split("_", 1)[1]
            g = rivals[(rivals["target"] == "flip") & (rivals["majority"] == x)
                       & (rivals["committed"].astype(float) == float(c["committed"]))]
            per = g.groupby("forecaster", sort=False)["p_event"].mean()
        else:
            pb = (info.get("base_rate") or {}).get("p")
            per = pd.Series({"base_rate": pb[c["key"]]}) if pb and c["key"] in pb else pd.Series(dtype=float)
        for name, p in per.items():
            if name == "coin" or not np.isfinite(p):
                continue
            lo, hi = _binomial_interval(p, n_obs, level)
            out.append({**base, "forecaster": name, "low": lo / n_obs, "high": hi / n_obs, "zero_width": lo == hi,
                        "covered": bool(lo <= k_obs <= hi)})
    return pd.DataFrame(out, columns=_RIVAL_COVERAGE_COLUMNS)


# ----------------------------------------------------------------------------- result type
@dataclass(frozen=True)
class Scores:
    """Scores of a prediction on observed runs.

    Attributes
    ----------
    runs : pandas.DataFrame
        One row per scored run: ``run``, ``target`` (``"flip"`` or ``"consensus"``),
        ``majority``, ``challenger``, ``committed`` (flip runs), ``observed`` (1/0 for flips; the
        winning name or ``"none"``), ``p_observed`` (predictive probability of what happened),
        ``p_event`` (flip runs: predicted flip probability), ``brier``, ``log_score``.
    coverage : pandas.DataFrame
        One row per quantity and interval: ``quantity``, ``key``, ``committed``, ``observed``,
        ``n_obs``, ``interval`` (``"underlying"`` / ``"experiment"``), ``low``, ``high``,
        ``n_sim`` (simulated runs per draw behind the interval), ``covered``, ``zero_width``
        (``low == high``).
    reliability : pandas.DataFrame
        Reliability-diagram bins: ``target``, ``bin_low``, ``bin_high``, ``n``, ``mean_p``,
        ``freq`` (observed frequency), ``low``, ``high`` (Clopper-Pearson 95 %).
    excluded : pandas.DataFrame
        Runs matching the prediction's setting but not scored: ``run``, ``reason``
        (``"used by the fit"``, ``"censored"``, ``"count not predicted"``, ``"direction not
        predicted"``, ``"consensus not predicted"``).
    settings : dict
        The scoring settings; ``settings["rivals"]`` says how each rival was made (the fit runs'
        winners, the strong convention, what the logistic was trained on and its coefficients).
    rivals : pandas.DataFrame
        The rivals' forecasts of the same runs (:mod:`normlab.calibration.evaluate.rivals`): ``run``,
        ``target``, ``majority``, ``committed``, ``observed``, ``forecaster`` (``"direction_rule"``,
        ``"logistic"``, ``"base_rate"``, ``"coin"``), ``p_event``, ``p_observed``, ``brier``,
        ``log_score``.
    rival_coverage : pandas.DataFrame
        Flip fractions per count and shares of each consensus winner with the interval of an
        experiment of the observed size from each forecaster (``normlab``: its experiment
        interval; a rival: the binomial of ``n_obs`` runs at its probability): ``quantity``,
        ``key``, ``committed``, ``observed``, ``n_obs``, ``forecaster``, ``low``, ``high``,
        ``zero_width``, ``covered``.

    References
    ----------
    Brier (1950); Gneiting & Raftery, JASA 102, 359 (2007); Flint Ashery, Aiello & Baronchelli,
    Sci. Adv. 11, eadu9368 (2025).
    """

    runs: pd.DataFrame
    coverage: pd.DataFrame
    reliability: pd.DataFrame
    excluded: pd.DataFrame
    settings: dict = field(default_factory=dict)
    rivals: pd.DataFrame = None
    rival_coverage: pd.DataFrame = None

    def __post_init__(self):
        if self.rivals is None:
            object.__setattr__(self, "rivals", pd.DataFrame(columns=_RIVAL_COLUMNS))
        if self.rival_coverage is None:
            object.__setattr__(self, "rival_coverage", pd.DataFrame(columns=_RIVAL_COVERAGE_COLUMNS))

    # ------------------------------------------------------------------ summaries
    def forecasts(self) -> pd.DataFrame:
        """Every forecast of every scored run, normlab's and its rivals': ``run``, ``target``,
        ``majority``, ``committed``, ``observed``, ``forecaster``, ``p_event``, ``p_observed``,
        ``brier``, ``log_score``."""
        own = self.runs.assign(forecaster="normlab")
        cols = _RIVAL_COLUMNS
        own = own[[c for c in cols if c in own.columns]] if len(own) else pd.DataFrame(columns=cols)
        parts = [p for p in (own, self.rivals) if len(p)]
        return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)

    def comparison(self) -> pd.DataFrame:
        """normlab's scores beside its rivals' on the same runs.

        One row per group of runs and forecaster. Groups: flips of every scored committed run
        (``majority = "all"``), then of each direction (``majority`` the name of the initial
        consensus; ``convention``: ``"strong"`` for the name the fit's runs converged to,
        ``"weak"`` otherwise), and the consensus winners.

        Returns
        -------
        pandas.DataFrame
            ``target``, ``majority``, ``convention``, ``forecaster``, ``n``, ``brier``,
            ``log_score``, and the paired differences rival - normlab over the same runs with
            their standard errors: ``brier_diff``, ``brier_diff_se``, ``log_diff``,
            ``log_diff_se`` (negative: the rival scores better).
        """
        return compare_forecasts(self.forecasts(), strong=(self.settings.get("rivals") or {}).get("strong"))

    def coverage_summary(self) -> pd.DataFrame:
        """Coverage of normlab's intervals per group of rows, with the share of zero-width rows.

        Returns
        -------
        pandas.DataFrame
            ``group`` (``"all"``, ``"<X>-majority"`` for the rows of a direction, ``"winners"``
            for the convergence rows), ``interval``, ``n``, ``covered`` (share inside),
            ``zero_width`` (share of rows whose interval is one value: ``low == high``, for a
            flip fraction or a winner's share almost always exactly 0 or 1), ``covered_other``
            (coverage of the rows that are not zero-width; NaN if none).
        """
        return summarize_coverage(self.coverage)

    def to_frame(self) -> pd.DataFrame:
        """Tidy scores: ``metric`` (``brier``, ``log_score``, ``coverage``, ``zero_width``),
        ``target`` (``flip``, ``consensus``, or the interval kind for coverage), ``majority``,
        ``committed`` (NaN: all counts), ``forecaster`` (``normlab`` or a rival), ``value``, ``n``."""
        rows = []
        fc = self.forecasts()
        for (tgt, name), g in fc.groupby(["target", "forecaster"], sort=False):
            for m in ("brier", "log_score"):
                rows.append({"metric": m, "target": tgt, "majority": "all", "committed": np.nan, "forecaster": name,
                             "value": float(g[m].mean()), "n": int(len(g))})
            if tgt == "flip":
                for (x, c), gg in g.groupby(["majority", "committed"], sort=True):
                    for m in ("brier", "log_score"):
                        rows.append({"metric": m, "target": tgt, "majority": x, "committed": float(c),
                                     "forecaster": name, "value": float(gg[m].mean()), "n": int(len(gg))})
        cv = self.coverage
        for kind, g in cv.groupby("interval", sort=False):
            for m, col in (("coverage", "covered"), ("zero_width", "zero_width")):
                rows.append({"metric": m, "target": kind, "majority": "all", "committed": np.nan,
                             "forecaster": "normlab", "value": float(g[col].mean()), "n": int(len(g))})
        return pd.DataFrame(rows, columns=["metric", "target", "majority", "committed", "forecaster", "value", "n"])

    def summary(self) -> dict:
        """JSON-friendly block (the ``scores`` of ``normlab calibrate --json``).

        normlab's scores (``brier_flip`` ... ``coverage``, with the share of zero-width
        intervals beside each coverage), its rivals' on the same runs (``rivals``; ``reference``
        is the coin), the same per direction (``by_direction``), the flip fractions and winner
        shares inside each forecaster's experiment interval (``fraction_coverage``) and, in plain
        words, every group and score where a rival beats normlab (``rival_wins``).
        """
        def mean(tgt, col):
            g = self.runs[self.runs["target"] == tgt]
            return float(g[col].mean()) if len(g) else None

        W = len(self.settings.get("names", ())) or 2
        ex = self.excluded["reason"].value_counts().to_dict() if len(self.excluded) else {}
        comp = self.comparison()
        cs = self.coverage_summary()
        fcov = _fraction_coverage_summary(self.rival_coverage)
        info = self.settings.get("rivals") or {}

        def cmp(tgt, majority, name, col):
            g = comp[(comp["target"] == tgt) & (comp["majority"] == majority) & (comp["forecaster"] == name)]
            return None if g.empty else float(g[col].iloc[0])

        rivals = {}
        for name in RIVALS:
            tgt = "consensus" if name == "base_rate" else "flip"
            d = dict(info.get(name) or {})
            if name == "coin":
                d = {"how": "every outcome equally likely"}
            for t in (("flip", "consensus") if name == "coin" else (tgt,)):
                d[f"brier_{t}"] = cmp(t, "all", name, "brier")
                d[f"log_score_{t}"] = cmp(t, "all", name, "log_score")
            rivals[name] = d
        by_dir = []
        for x in comp.loc[(comp["target"] == "flip") & (comp["majority"] != "all"), "majority"].unique():
            g = comp[(comp["target"] == "flip") & (comp["majority"] == x)]
            conv = g["convention"].iloc[0]
            by_dir.append({"majority": str(x), "convention": conv if isinstance(conv, str) else None,
                           "n_flip_runs": int(g["n"].iloc[0]),
                           "brier": {r["forecaster"]: float(r["brier"]) for _, r in g.iterrows()},
                           "log_score": {r["forecaster"]: float(r["log_score"]) for _, r in g.iterrows()},
                           "coverage": _coverage_block(cs, f"{x}-majority"),
                           "fraction_coverage": fcov.get(("flip", str(x)))})
        return {
            "brier_flip": mean("flip", "brier"),
            "log_score_flip": mean("flip", "log_score"),
            "brier_consensus": mean("consensus", "brier"),
            "log_score_consensus": mean("consensus", "log_score"),
            "coverage": _coverage_block(cs, "all"),
            "n_flip_runs": int((self.runs["target"] == "flip").sum()),
            "n_consensus_runs": int((self.runs["target"] == "consensus").sum()),
            "excluded": {str(k): int(v) for k, v in ex.items()},
            "reference": {"brier_flip": 0.25, "log_score_flip": math.log(2.0),
                          "brier_consensus": 1.0 - 1.0 / (W + 1), "log_score_consensus": math.log(W + 1)},
            "rivals": rivals,
            "by_direction": by_dir,
            "winners_coverage": _coverage_block(cs, "winners"),
            "fraction_coverage": {"flip": fcov.get(("flip", "all")), "consensus": fcov.get(("consensus", "all"))},
            "rival_wins": rival_wins(comp),
            "within_rounds": self.settings.get("within_rounds"),
            "level": self.settings.get("level"),
        }

    def __repr__(self) -> str:
        s = self.summary()

        def f(v):
            return "-" if v is None else f"{v:.3f}"

        rv = s["rivals"]
        return (f"Scores(flip runs {s['n_flip_runs']}: Brier {f(s['brier_flip'])}, log {f(s['log_score_flip'])} "
                f"[direction rule {f(rv['direction_rule'].get('brier_flip'))}, logistic "
                f"{f(rv['logistic'].get('brier_flip'))}]; "
                f"consensus runs {s['n_consensus_runs']}: Brier {f(s['brier_consensus'])}, "
                f"log {f(s['log_score_consensus'])} [base rate {f(rv['base_rate'].get('brier_consensus'))}]; "
                f"coverage experiment {f(s['coverage']['experiment'])} "
                f"of {s['coverage']['n_experiment']} ({f(s['coverage']['zero_width_experiment'])} zero-width), "
                f"underlying {f(s['coverage']['underlying'])} of {s['coverage']['n_underlying']})")

    def _repr_html_(self) -> str:
        import html

        head = f"<p><code>{html.escape(repr(self))}</code></p>"
        wins = self.summary()["rival_wins"]
        tail = ("<p>Where a rival scores better than normlab:</p><ul>"
                + "".join(f"<li>{html.escape(w)}</li>" for w in wins) + "</ul>") if wins else ""
        return (head + self.comparison().to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="")
                + self.coverage_summary().to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="") + tail)

    @plotting
    def plot_intervals(self, key=None, ax=None):
        """Flip fraction per committed count: the underlying interval (thick), the interval of an
        experiment of the observed size (thin) and the observed fraction (dot; open when outside
        the experiment interval), for one direction ``key`` (``"overturn_<X>"``; default the first)."""
        import matplotlib.pyplot as plt

        c = self.coverage[self.coverage["quantity"] == "flip_fraction"]
        if c.empty:
            raise ValueError("no flip fractions to show: the observed runs hold no committed-minority runs")
        key = c["key"].iloc[0] if key is None else key
        c = c[c["key"] == key]
        if c.empty:
            raise ValueError(f"no flip fractions for {key!r}; available: {sorted(self.coverage['key'].unique())}")
        if ax is None:
            _, ax = plt.subplots(figsize=(5.4, 4.0), layout="constrained")
        u = c[c["interval"] == "underlying"].set_index("committed")
        e = c[c["interval"] == "experiment"].set_index("committed")
        x = u.index.to_numpy(float)
        ax.vlines(x - 0.08, u["low"], u["high"], color="C0", lw=5, alpha=0.55, label="underlying probability")
        ax.vlines(x + 0.08, e["low"], e["high"], color="C1", lw=1.6, label="experiment of the observed size")
        for col in ("low", "high"):  # end ticks keep a zero-width interval visible
            ax.plot(x + 0.08, e[col], "_", color="C1", ms=7, mew=1.6)
            ax.plot(x - 0.08, u[col], "_", color="C0", ms=9, mew=2, alpha=0.7)
        ok = e["covered"].to_numpy(bool)
        ax.plot(x[ok], e["observed"].to_numpy()[ok], "ko", ms=5, label="observed (inside)")
        if (~ok).any():
            ax.plot(x[~ok], e["observed"].to_numpy()[~ok], "o", mfc="w", mec="k", ms=6, label="observed (outside)")
        for xi, n in zip(x, e["n_obs"]):
            ax.annotate(f"{int(n)}", (xi, 1.04), ha="center", fontsize=7, color="0.4")
        ax.set(xlabel="committed agents", ylabel="flip fraction", ylim=(-0.05, 1.12),
               title=f"{key}: {int(self.settings.get('level', 0.95) * 100)}% intervals (runs observed on top)")
        ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
        return ax

    @plotting
    def plot(self, ax=None):
        """Reliability diagram: observed frequency against predicted probability, per target
        (flip events; each name's consensus, one-vs-rest), with Clopper-Pearson bars and marker
        area proportional to the number of runs in the bin."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(4.6, 4.2), layout="constrained")
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
        rel = self.reliability
        for k, (tgt, g) in enumerate(rel.groupby("target", sort=False)):
            g = g[g["n"] > 0]
            c = f"C{k}"
            ax.errorbar(g["mean_p"], g["freq"], yerr=error_bars(g["freq"], g["low"], g["high"]), fmt="none",
                        ecolor=c, alpha=0.6, lw=1)
            ax.scatter(g["mean_p"], g["freq"], s=15 + 85 * g["n"] / max(1, rel["n"].max()), color=c,
                       label=f"{tgt} ({int(g['n'].sum())} forecasts)", zorder=3, alpha=0.85)
        ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03), xlabel="predicted probability",
               ylabel="observed frequency", title="reliability of the predicted outcomes")
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        return ax

    @classmethod
    def _contract_example(cls) -> "Scores":
        """Four committed runs and two convergence runs scored, literal numbers, no rival
        (``tests/umbrella/test_contracts.py``)."""
        runs = pd.DataFrame([
            (0, "flip", "A", "B", 1.0, 0, 0.7, 0.3, 0.09, math.log(0.7)),
            (1, "flip", "A", "B", 1.0, 1, 0.3, 0.3, 0.49, math.log(0.3)),
            (2, "flip", "A", "B", 2.0, 1, 0.8, 0.8, 0.04, math.log(0.8)),
            (3, "flip", "B", "A", 2.0, 1, 0.6, 0.6, 0.16, math.log(0.6)),
            (4, "consensus", None, None, float("nan"), "A", 0.7, float("nan"), 0.13, math.log(0.7)),
            (5, "consensus", None, None, float("nan"), "B", 0.3, float("nan"), 0.73, math.log(0.3))],
            columns=["run", "target", "majority", "challenger", "committed", "observed", "p_observed", "p_event", "brier",
                     "log_score"])
        coverage = pd.DataFrame([
            ("flip_fraction", "overturn_A", 1.0, 0.5, 2, "experiment", 0.0, 1.0, 2, True, False),
            ("flip_fraction", "overturn_A", 2.0, 1.0, 1, "experiment", 0.0, 1.0, 1, True, False),
            ("p_consensus", "A", float("nan"), 0.5, 2, "experiment", 0.0, 1.0, 2, True, False),
            ("p_consensus", "A", float("nan"), 0.5, 2, "underlying", 0.6, 0.8, 40, False, False)],
            columns=["quantity", "key", "committed", "observed", "n_obs", "interval", "low", "high", "n_sim", "covered",
                     "zero_width"])
        reliability = pd.DataFrame([("flip", 0.2, 0.4, 2, 0.3, 0.5, 0.01, 0.99), ("flip", 0.6, 0.8, 2, 0.7, 1.0, 0.16, 1.0)],
                                   columns=["target", "bin_low", "bin_high", "n", "mean_p", "freq", "low", "high"])
        return cls(runs=runs, coverage=coverage, reliability=reliability,
                   excluded=pd.DataFrame({"run": [6], "reason": ["used by the fit"]}), settings={"names": ["A", "B"]})


# ----------------------------------------------------------------------------- entry point
def score(prediction, observed_log: GameLog, *, exclude=None, llm=None, level: float | None = None,
          n_resample: int = 20, rng=None) -> Scores:
    """Score a prediction against the observed runs of its setting (names, ``H``, ``N``).

    Parameters
    ----------
    prediction : Prediction
        From :func:`normlab.calibration.predict`; committed counts that are scored must be among
        its swept counts, and flips are read with its ``within_rounds``.
    observed_log : normlab.schema.GameLog
        Observed runs (published archives, normlab LLM runs, simulations); those whose name pool
        (any order), memory length and population size match the prediction are scored: runs
        from empty memories on their consensus winner, runs from a consensus (committed
        minorities, unperturbed consensus runs) on whether they flipped.
    exclude : iterable of int, optional
        Run ids not to score (the runs the fit used).
    llm : str or sequence of str, optional
        Keep runs of these LLMs (``model`` run column).
    level : float, optional
        Interval level (default: the prediction's).
    n_resample : int, optional
        Replicate experiments per draw for the experiment interval of the per-run critical mass.
    rng : optional
        Seeds that resampling.

    Returns
    -------
    Scores

    Raises
    ------
    TypeError
        ``observed_log`` is not a GameLog or ``prediction`` not a Prediction.
    ValueError
        No run to score (none matches, or all are excluded or censored).

    References
    ----------
    Brier (1950); Gneiting & Raftery, JASA 102, 359 (2007); Flint Ashery, Aiello & Baronchelli,
    Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3.

    Examples
    --------
    >>> sc = score(pred, log, exclude=fit_runs)       # doctest: +SKIP
    >>> sc.summary()["brier_flip"], sc.plot()          # doctest: +SKIP
    """
    if not isinstance(prediction, Prediction):
        raise TypeError(f"prediction must be a normlab.calibration.Prediction; got {type(prediction).__name__}")
    if not isinstance(observed_log, GameLog):
        raise TypeError(f"observed_log must be a normlab.schema.GameLog; got {type(observed_log).__name__}")
    lev = prediction.level if level is None else float(level)
    if not 0 < lev < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    nres = check_int(n_resample, "n_resample", low=1)
    sub, excluded = _matching(observed_log, prediction, llm, exclude)
    if sub.runs.empty:
        raise ValueError(f"no run to score: none of the log's runs has names {','.join(prediction.names)}, "
                         f"H = {prediction.memory}, N = {prediction.n_agents}"
                         + (f" and model {llm}" if llm else "") + (" outside the excluded runs" if len(excluded) else ""))
    cons_rows, cons_runs = _consensus_rows(sub, prediction)
    if cons_rows.empty and len(cons_runs):  # predicted with consensus=False
        excluded = pd.concat([excluded, pd.DataFrame({"run": cons_runs["run"].to_numpy(),
                                                      "reason": "consensus not predicted"})], ignore_index=True)
    flip_rows, flip_ex, _ = _flip_rows(sub, prediction)
    excluded = pd.concat([excluded, flip_ex], ignore_index=True) if len(flip_ex) else excluded
    rows = pd.concat([r for r in (cons_rows, flip_rows) if len(r)], ignore_index=True) if (len(cons_rows) or len(flip_rows)) \
        else pd.DataFrame()
    if rows.empty:
        raise ValueError(f"no run to score at names {','.join(prediction.names)}, H = {prediction.memory}, "
                         f"N = {prediction.n_agents}: {len(excluded)} matching runs were excluded "
                         f"({', '.join(sorted(set(excluded['reason'])))})")
    cov = []
    if len(flip_rows):
        cov += _published_observed(sub, prediction, _flip_coverage(flip_rows, prediction, lev, rng, nres))
    if len(cons_rows):
        cov += _consensus_coverage(cons_runs, prediction, lev)
        cov += _rounds_coverage(GameLog(sub.decisions[sub.decisions["run"].isin(cons_runs["run"])], cons_runs),
                                prediction, lev)
    coverage = pd.DataFrame(cov, columns=["quantity", "key", "committed", "observed", "n_obs", "interval", "low",
                                          "high", "n_sim", "covered"])
    coverage["zero_width"] = (coverage["low"] == coverage["high"]).to_numpy(bool)
    rivals, rival_info = _rival_forecasts(rows, sub, observed_log, prediction, exclude)
    rival_cov = _rival_coverage(coverage, rivals, rival_info, lev)
    if len(cons_rows):
        c = prediction.consensus
        tot = c.groupby("name")["runs"].sum()
        n = int(c.drop_duplicates("draw")["n_runs"].sum())
        K = len(prediction.names) + 1
        rows.attrs["p"] = {nm: float(kt_probability(tot.get(nm, 0), n, K)) for nm in prediction.names}
    rel = _reliability(rows, prediction.names)
    rows.attrs = {}
    settings = {"names": list(prediction.names), "memory": prediction.memory, "n_agents": prediction.n_agents,
                "within_rounds": prediction.within_rounds, "level": lev, "llm": llm,
                "max_round": prediction.settings.get("max_round"),
                "design_runs": prediction.settings.get("design_runs"), "n_resample": nres, "rivals": rival_info}
    return Scores(runs=rows, coverage=coverage, reliability=rel, excluded=excluded.reset_index(drop=True),
                  settings=settings, rivals=rivals, rival_coverage=rival_cov)
