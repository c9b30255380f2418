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
gives every outcome the same probability scores Brier 0.25 and log ``ln 2 = 0.693`` on flips,
and ``1 - 1/K`` and ``ln K`` on consensus winners (``reference`` in :meth:`Scores.summary`).

Interval coverage -- two intervals, because they answer different questions
    A draw's flip (or consensus) probability is known only through its ``n`` simulated runs, so
    the spread of the per-draw probabilities over the posterior is summarised by a beta
    distribution with their mean and their between-draw variance -- the frequencies' variance
    minus its binomial Monte Carlo part, and never less than the Monte Carlo variance of the
    pooled mean (:func:`beta_summary`).
    **underlying**: the credible interval of that beta distribution: what the probability itself
    is.
    **experiment**: the interval of the beta-binomial of ``n_obs`` runs: what an experiment *of
    the observed size* would report, the one an observed value should fall in 95 % of the time. A 5-run experiment can read 0 % or 100 %
    where the underlying probability is 30-70 %: the underlying interval then "misses" a
    perfectly predicted observation, the experiment interval does not.
    An observed fraction ``k / n_obs`` counts as inside an underlying interval ``[lo, hi]`` when
    it is the fraction of ``n_obs`` runs nearest to some point of it (``round(lo n_obs) <= k <=
    round(hi n_obs)``): an experiment reads a probability only to that resolution.
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
(1981); A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 2,
Fig. 3, Table S3, Methods "Committed Minorities".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import plotting
from normlab._rng import as_generator
from normlab._validate import check_int
from normlab.llm_runs.published.ainorms import first_round_reaching, mean_success_by_round
from normlab.schema import GameLog
from normlab.theory import clopper_pearson

from .observed_critical_mass import empirical_critical_mass, run_flips
from .prediction_result import Prediction

__all__ = ["Scores", "score", "brier_binary", "log_score_binary", "brier_categorical", "log_score_categorical",
           "kt_probability", "beta_summary", "denoised_probabilities", "experiment_interval"]

NONE = "none"
RELIABILITY_BINS = 10


# ----------------------------------------------------------------------------- scoring rules
def kt_probability(k, n, n_outcomes: int = 2):
    """Predictive probability of an outcome seen ``k`` times in ``n``: ``(k + 1/2) / (n + K/2)``.

    Parameters
    ----------
    k, n : array_like
    n_outcomes : int, optional
        ``K``, the number of possible outcomes.

    Returns
    -------
    numpy.ndarray or float

    References
    ----------
    Krichevsky & Trofimov, IEEE Trans. Inf. Theory 27, 199 (1981).
    """
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    return (k + 0.5) / (n + 0.5 * n_outcomes)


def brier_binary(p, y):
    """Brier score ``(p - y) ** 2`` of a forecast probability ``p`` of an event that happened
    (``y = 1``) or not (``y = 0``)."""
    p = np.asarray(p, float)
    return (p - np.asarray(y, float)) ** 2


def log_score_binary(p, y):
    """Log score ``-ln p`` (event happened) or ``-ln(1 - p)`` (it did not), natural log."""
    p = np.asarray(p, float)
    y = np.asarray(y, bool)
    return -np.log(np.where(y, p, 1.0 - p))


def brier_categorical(probs, observed: int) -> float:
    """Brier's multi-category score ``sum_j (p_j - 1[j = observed]) ** 2`` (in [0, 2])."""
    p = np.asarray(probs, float)
    o = np.zeros_like(p)
    o[int(observed)] = 1.0
    return float(((p - o) ** 2).sum())


def log_score_categorical(probs, observed: int) -> float:
    """``-ln p_observed``."""
    return float(-np.log(np.asarray(probs, float)[int(observed)]))


def denoised_probabilities(k, n) -> np.ndarray:
    """Per-draw probabilities from ``k_d`` events in ``n_d`` simulated runs, Monte Carlo noise removed.

    The frequencies ``f_d = k_d / n_d`` spread more than the draws' true probabilities: their
    variance ``V`` adds the binomial ``B = mean(f_d (1 - f_d) / (n_d - 1))``. They are shrunk
    linearly towards their mean ``f``, ``p_d = f + s (f_d - f)`` with
    ``s = min(1, sqrt(max(V - B, f (1 - f) / sum(n_d)) / V))``: their variance becomes the
    method-of-moments between-draw variance, but never less than the Monte Carlo variance of the
    pooled mean (what all the simulated runs together leave unknown). Mean and order are kept
    and every ``p_d`` stays within ``[min f_d, max f_d]``.

    Parameters
    ----------
    k, n : array_like of int
        Events and simulated runs per draw.

    Returns
    -------
    numpy.ndarray
    """
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    f = k / n
    if f.size < 2:
        return f
    V = float(f.var(ddof=1))
    if V <= 0:
        return f
    m = float(f.mean())
    B = float(np.mean(f * (1.0 - f) / np.maximum(n - 1.0, 1.0)))
    floor = m * (1.0 - m) / float(n.sum())
    s = min(1.0, math.sqrt(max(V - B, floor) / V))
    return m + s * (f - m)


def beta_summary(k, n) -> tuple[float, float]:
    """Beta distribution of the per-draw probability behind ``k_d`` events in ``n_d`` runs.

    Mean ``m = (sum k + 1/2) / (sum n + 1)`` (pooled, Krichevsky-Trofimov); variance
    ``v = max(V - B, m (1 - m) / sum n)`` with ``V`` the variance of the frequencies ``k_d / n_d``
    over draws and ``B = mean(f_d (1 - f_d) / (n_d - 1))`` their binomial Monte Carlo part; the
    floor is the Monte Carlo variance of the pooled mean. Then ``a = m c``, ``b = (1 - m) c`` with
    ``c = m (1 - m) / v - 1`` (at least 1e-3).

    Parameters
    ----------
    k, n : array_like of int
        Events and simulated runs per draw.

    Returns
    -------
    (float, float)
        ``(a, b)``.
    """
    k = np.asarray(k, float).reshape(-1)
    n = np.asarray(n, float).reshape(-1)
    N = float(n.sum())
    m = (float(k.sum()) + 0.5) / (N + 1.0)
    f = k / n
    V = float(f.var(ddof=1)) if f.size > 1 else 0.0
    B = float(np.mean(f * (1.0 - f) / np.maximum(n - 1.0, 1.0)))
    v = max(V - B, m * (1.0 - m) / N)
    c = max(m * (1.0 - m) / v - 1.0, 1e-3)
    return m * c, (1.0 - m) * c


def experiment_interval(a: float, b: float, n_obs: int, level: float = 0.95) -> tuple[int, int]:
    """Equal-tailed interval of the count an experiment of ``n_obs`` runs would report:
    quantiles of ``BetaBinomial(n_obs, a, b)``.

    Returns
    -------
    (int, int)
        Smallest counts whose CDF reaches ``(1 - level) / 2`` and ``(1 + level) / 2``.
    """
    from scipy.stats import betabinom

    x = np.arange(int(n_obs) + 1)
    cdf = np.cumsum(betabinom.pmf(x, int(n_obs), a, b))
    al = (1.0 - level) / 2.0
    lo = int(np.searchsorted(cdf, al - 1e-12))
    hi = int(np.searchsorted(cdf, 1.0 - al - 1e-12))
    return lo, min(hi, int(n_obs))


def _underlying(a: float, b: float, level: float) -> tuple[float, float]:
    from scipy.stats import beta

    al = (1.0 - level) / 2.0
    return float(beta.ppf(al, a, b)), float(beta.ppf(1.0 - al, a, b))


def _q(x, level):
    """Median and equal-tailed interval without interpolation (inf allowed)."""
    x = np.asarray(x, float)
    x = x[~np.isnan(x)]
    if not x.size:
        return float("nan"), float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    return tuple(float(np.quantile(x, q, method="inverted_cdf")) for q in (0.5, a, 1.0 - a))


def _covers_at_resolution(lo: float, hi: float, k_obs: int, n_obs: int) -> bool:
    """Whether ``k_obs / n_obs`` is the nearest attainable fraction to some point of ``[lo, hi]``
    (an ``n_obs``-run experiment reads a probability only to within ``1 / (2 n_obs)``)."""
    return bool(math.floor(lo * n_obs + 0.5) <= k_obs <= math.floor(hi * n_obs + 0.5))


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
        ``n_sim`` (simulated runs per draw behind the interval), ``covered``.
    reliability : pandas.DataFrame
        Reliability-diagram bins: ``target``, ``bin_low``, ``bin_high``, ``n``, ``mean_p``,
        ``freq`` (observed frequency), ``low``, ``high`` (Clopper-Pearson 95 %).
    excluded : pandas.DataFrame
        Runs matching the prediction's setting but not scored: ``run``, ``reason``
        (``"used by the fit"``, ``"censored"``, ``"count not predicted"``, ``"direction not
        predicted"``, ``"consensus not predicted"``).
    settings : dict

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

    # ------------------------------------------------------------------ summaries
    def to_frame(self) -> pd.DataFrame:
        """Tidy scores: ``metric`` (``brier``, ``log_score``, ``coverage``), ``target``
        (``flip``, ``consensus``, or the interval kind for coverage), ``majority``,
        ``committed`` (NaN: all counts), ``value``, ``n``."""
        rows = []
        r = self.runs
        for tgt, g in r.groupby("target", sort=False):
            for m in ("brier", "log_score"):
                rows.append({"metric": m, "target": tgt, "majority": "all", "committed": np.nan,
                             "value": float(g[m].mean()), "n": int(len(g))})
            if tgt == "flip":
                for (x, c), gg in g.groupby(["majority", "committed"], sort=True):
                    for m in ("brier", "log_score"):
                        rows.append({"metric": m, "target": tgt, "majority": x, "committed": float(c),
                                     "value": float(gg[m].mean()), "n": int(len(gg))})
        cv = self.coverage
        for kind, g in cv.groupby("interval", sort=False):
            rows.append({"metric": "coverage", "target": kind, "majority": "all", "committed": np.nan,
                         "value": float(g["covered"].mean()), "n": int(len(g))})
        return pd.DataFrame(rows, columns=["metric", "target", "majority", "committed", "value", "n"])

    def summary(self) -> dict:
        """JSON-friendly block (the ``scores`` of ``normlab calibrate --json``)."""
        def mean(tgt, col):
            g = self.runs[self.runs["target"] == tgt]
            return float(g[col].mean()) if len(g) else None

        cov = {}
        for kind in ("experiment", "underlying"):
            g = self.coverage[self.coverage["interval"] == kind]
            cov[kind] = float(g["covered"].mean()) if len(g) else None
            cov[f"n_{kind}"] = int(len(g))
        W = len(self.settings.get("names", ())) or 2
        ex = self.excluded["reason"].value_counts().to_dict() if len(self.excluded) else {}
        return {
            "brier_flip": mean("flip", "brier"),
            "log_score_flip": mean("flip", "log_score"),
            "brier_consensus": mean("consensus", "brier"),
            "log_score_consensus": mean("consensus", "log_score"),
            "coverage": cov,
            "n_flip_runs": int((self.runs["target"] == "flip").sum()),
            "n_consensus_runs": int((self.runs["target"] == "consensus").sum()),
            "excluded": {str(k): int(v) for k, v in ex.items()},
            "reference": {"brier_flip": 0.25, "log_score_flip": math.log(2.0),
                          "brier_consensus": 1.0 - 1.0 / (W + 1), "log_score_consensus": math.log(W + 1)},
            "within_rounds": self.settings.get("within_rounds"),
            "level": self.settings.get("level"),
        }

    def __repr__(self) -> str:
        s = self.summary()

        def f(v):
            return "-" if v is None else f"{v:.3f}"

        return (f"Scores(flip runs {s['n_flip_runs']}: Brier {f(s['brier_flip'])}, log {f(s['log_score_flip'])}; "
                f"consensus runs {s['n_consensus_runs']}: Brier {f(s['brier_consensus'])}, "
                f"log {f(s['log_score_consensus'])}; coverage experiment {f(s['coverage']['experiment'])} "
                f"of {s['coverage']['n_experiment']}, underlying {f(s['coverage']['underlying'])} "
                f"of {s['coverage']['n_underlying']})")

    def _repr_html_(self) -> str:
        import html

        head = f"<p><code>{html.escape(repr(self))}</code></p>"
        return head + self.to_frame().to_html(index=False, float_format=lambda v: f"{v:.3f}")

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
            ax.errorbar(g["mean_p"], g["freq"], yerr=[g["freq"] - g["low"], g["high"] - g["freq"]], fmt="none",
                        ecolor=c, alpha=0.6, lw=1)
            ax.scatter(g["mean_p"], g["freq"], s=15 + 85 * g["n"] / max(1, rel["n"].max()), color=c,
                       label=f"{tgt} ({int(g['n'].sum())} forecasts)", zorder=3, alpha=0.85)
        ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03), xlabel="predicted probability",
               ylabel="observed frequency", title="reliability of the predicted outcomes")
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        return ax


# ----------------------------------------------------------------------------- observed runs
def _matching(log: GameLog, prediction, llm, exclude):
    runs = log.runs
    target = frozenset(prediction.names)
    mask = np.array(runs["names"].map(lambda s: frozenset(str(s).split(",")) == target), dtype=bool)
    mask &= (runs["memory"] == prediction.memory).to_numpy() & (runs["n_agents"] == prediction.n_agents).to_numpy()
    mask &= (runs["kind"] != "probe").to_numpy()
    if llm is not None:
        models = [llm] if isinstance(llm, str) else list(llm)
        mask &= runs["model"].isin(models).to_numpy()
    sel = runs[mask]
    ex = set(int(r) for r in (exclude if exclude is not None else []))
    used = sel["run"].isin(ex).to_numpy()
    excluded = pd.DataFrame({"run": sel.loc[used, "run"].to_numpy(), "reason": "used by the fit"})
    keep = sel[~used]
    return GameLog(log.decisions[log.decisions["run"].isin(keep["run"])], keep), excluded


def _consensus_rows(sub: GameLog, prediction):
    runs = sub.runs
    init = runs["initial"].astype(str)
    cons = runs[(init.isin(["empty", "None", "nan"])) & (runs["committed_count"] == 0)]
    if cons.empty or prediction.consensus.empty:
        return pd.DataFrame(), cons
    names = list(prediction.names)
    cats = names + [NONE]
    K = len(cats)
    c = prediction.consensus
    tot = c.groupby("name")["runs"].sum()
    n = int(c.drop_duplicates("draw")["n_runs"].sum())
    p = np.array([kt_probability(tot.get(nm, 0), n, K) for nm in cats])
    rows = []
    for _, r in cons.iterrows():
        w = r["consensus"]
        obs = NONE if (w is None or (isinstance(w, float) and np.isnan(w)) or str(w) not in names) else str(w)
        j = cats.index(obs)
        rows.append({"run": int(r["run"]), "target": "consensus", "majority": "", "challenger": "",
                     "committed": np.nan, "observed": obs, "p_observed": float(p[j]), "p_event": np.nan,
                     "brier": brier_categorical(p, j), "log_score": log_score_categorical(p, j)})
    return pd.DataFrame(rows), cons


def _flip_rows(sub: GameLog, prediction):
    runs = sub.runs
    if not runs["initial"].astype(str).str.startswith("consensus:").any():
        return pd.DataFrame(), pd.DataFrame(columns=["run", "reason"]), pd.DataFrame()
    rf = run_flips(sub, within_rounds=prediction.within_rounds)
    f = prediction.flips
    g = f.groupby(["majority", "challenger", "committed"])[["n_flips", "n_runs"]].sum()
    dirs = set(zip(f["majority"], f["challenger"]))
    rows, excluded = [], []
    for _, r in rf.iterrows():
        key = (r["majority"], r["challenger"], int(r["committed"]))
        if (r["majority"], r["challenger"]) not in dirs:
            excluded.append((int(r["run"]), "direction not predicted"))
            continue
        if key not in g.index:
            excluded.append((int(r["run"]), "count not predicted"))
            continue
        if bool(r["censored"]):
            excluded.append((int(r["run"]), "censored"))
            continue
        k, n = g.loc[key]
        p = float(kt_probability(k, n))
        y = bool(r["flipped"])
        rows.append({"run": int(r["run"]), "target": "flip", "majority": r["majority"], "challenger": r["challenger"],
                     "committed": int(r["committed"]), "observed": int(y), "p_observed": p if y else 1.0 - p,
                     "p_event": p, "brier": float(brier_binary(p, y)), "log_score": float(log_score_binary(p, y))})
    return pd.DataFrame(rows), pd.DataFrame(excluded, columns=["run", "reason"]), rf


# ----------------------------------------------------------------------------- coverage
def _flip_coverage(flip_rows, prediction, level, rng, n_resample):
    """Coverage rows of flip fractions and critical masses at the observed counts."""
    out = []
    f = prediction.flips
    for (x, y), obs in flip_rows.groupby(["majority", "challenger"], sort=False):
        fd = f[(f["majority"] == x) & (f["challenger"] == y)]
        counts = sorted(int(c) for c in obs["committed"].unique())
        kk, nn, pub = {}, {}, {}
        for c in counts:
            d = fd[fd["committed"] == c].sort_values("draw")
            kk[c], nn[c] = d["n_flips"].to_numpy(float), d["n_runs"].to_numpy(float)
            pub[c] = d["published_success"].to_numpy(bool)
            oc = obs[obs["committed"] == c]
            k_obs, n_obs = int(oc["observed"].sum()), int(len(oc))
            ab = beta_summary(kk[c], nn[c])
            lo_u, hi_u = _underlying(*ab, level)
            lo_e, hi_e = experiment_interval(*ab, n_obs, level)
            base = {"quantity": "flip_fraction", "key": f"overturn_{x}", "committed": c, "observed": k_obs / n_obs,
                    "n_obs": n_obs}
            out.append({**base, "interval": "underlying", "low": lo_u, "high": hi_u, "n_sim": int(np.median(nn[c])),
                        "covered": _covers_at_resolution(lo_u, hi_u, k_obs, n_obs)})
            out.append({**base, "interval": "experiment", "low": lo_e / n_obs, "high": hi_e / n_obs,
                        "n_sim": int(np.median(nn[c])), "covered": bool(lo_e <= k_obs <= hi_e)})
        # critical masses at the tested counts
        cs = np.asarray(counts, float)
        n_obs_c = {c: int((obs["committed"] == c).sum()) for c in counts}
        obs_frac = np.array([obs.loc[obs["committed"] == c, "observed"].mean() for c in counts])
        first = np.flatnonzero(obs_frac >= 0.5 - 1e-12)
        obs_cm = float(cs[first[0]]) if first.size else math.inf
        Pd = np.column_stack([denoised_probabilities(kk[c], nn[c]) for c in counts])  # draws x counts
        Nn = np.column_stack([nn[c] for c in counts])
        hit = Pd >= 0.5 - 1e-12
        under = np.where(hit.any(axis=1), cs[np.argmax(hit, axis=1)], math.inf)
        # experiment: n_obs runs per count, n_resample replicate experiments per draw
        D = Pd.shape[0]
        g = as_generator(rng)
        nob = np.array([n_obs_c[c] for c in counts])
        ko = g.binomial(nob[None, None, :], np.broadcast_to(np.clip(Pd, 0, 1)[:, None, :], (D, n_resample, len(counts))))
        hit_e = ko / nob[None, None, :] >= 0.5 - 1e-12
        exper = np.where(hit_e.any(axis=2), cs[np.argmax(hit_e, axis=2)], math.inf).reshape(-1)
        base = {"quantity": "critical_mass_per_run", "key": f"overturn_{x}", "committed": np.nan, "observed": obs_cm,
                "n_obs": int(len(obs))}
        for kind, v, nsim in (("underlying", under, int(np.median(Nn))), ("experiment", exper, int(np.median(Nn)))):
            _, lo, hi = _q(v, level)
            out.append({**base, "interval": kind, "low": lo, "high": hi, "n_sim": nsim,
                        "covered": bool(lo <= obs_cm <= hi)})
        # published rule: the draw's replication of the paper's design at the tested counts
        P = np.column_stack([pub[c] for c in counts])
        pub_cm = np.where(P.any(axis=1), cs[np.argmax(P, axis=1)], math.inf)
        out.append({"quantity": "critical_mass_published", "key": f"overturn_{x}", "committed": np.nan,
                    "observed": np.nan, "n_obs": int(len(obs)), "interval": "experiment",
                    "low": _q(pub_cm, level)[1], "high": _q(pub_cm, level)[2],
                    "n_sim": int(prediction.settings.get("design_runs", 10)), "covered": False,
                    "_pub_counts": counts})
    return out


def _published_observed(sub: GameLog, prediction, rows):
    """Fill in the observed published critical mass (the authors' rule at the tested counts)."""
    todo = [r for r in rows if r["quantity"] == "critical_mass_published"]
    if not todo:
        return rows
    mr = prediction.settings.get("max_round")
    e = empirical_critical_mass(sub, within_rounds=prediction.within_rounds, max_round=mr, n_boot=0)
    keep = []
    for r in rows:
        if r["quantity"] != "critical_mass_published":
            keep.append(r)
            continue
        counts = r.pop("_pub_counts")
        x = r["key"].split("_", 1)[1]
        cur = e.curves[(e.curves["majority"] == x) & e.curves["committed"].isin(counts)].sort_values("committed")
        ok = cur["published_success"]
        if ok.isna().any():  # runs shorter than the window at some count: the rule cannot be read
            continue
        hit = cur.loc[ok.astype(bool), "committed"]
        obs = float(hit.min()) if len(hit) else math.inf
        r["observed"] = obs
        r["covered"] = bool(r["low"] <= obs <= r["high"])
        keep.append(r)
    return keep


def _consensus_coverage(cons_runs, prediction, level):
    out = []
    c = prediction.consensus
    n_obs = int(len(cons_runs))
    names = list(prediction.names)
    won = cons_runs["consensus"].astype(object).where(cons_runs["consensus"].notna(), NONE).astype(str)
    for nm in names + [NONE]:
        d = c[c["name"] == nm].sort_values("draw")
        k, n = d["runs"].to_numpy(float), d["n_runs"].to_numpy(float)
        k_obs = int((won == nm).sum())
        ab = beta_summary(k, n)
        lo_u, hi_u = _underlying(*ab, level)
        lo_e, hi_e = experiment_interval(*ab, n_obs, level)
        base = {"quantity": "p_consensus", "key": nm, "committed": np.nan, "observed": k_obs / n_obs, "n_obs": n_obs}
        out.append({**base, "interval": "underlying", "low": lo_u, "high": hi_u, "n_sim": int(np.median(n)),
                    "covered": _covers_at_resolution(lo_u, hi_u, k_obs, n_obs)})
        out.append({**base, "interval": "experiment", "low": lo_e / n_obs, "high": hi_e / n_obs,
                    "n_sim": int(np.median(n)), "covered": bool(lo_e <= k_obs <= hi_e)})
    return out


def _rounds_coverage(sub_cons: GameLog, prediction, level):
    x = prediction.draw_stats["rounds_to_95"].to_numpy(float)
    if not x.size:
        return []
    obs = first_round_reaching(mean_success_by_round(sub_cons), 0.95)
    obs = math.inf if obs is None else float(obs)
    x = np.where(np.isnan(x), math.inf, x)
    _, lo, hi = _q(x, level)
    return [{"quantity": "rounds_to_95", "key": "", "committed": np.nan, "observed": obs,
             "n_obs": int(len(sub_cons.runs)), "interval": "experiment", "low": lo, "high": hi,
             "n_sim": int(prediction.consensus["n_runs"].iloc[0]) if len(prediction.consensus) else 0,
             "covered": bool(lo <= obs <= hi)}]


def _reliability(rows: pd.DataFrame, names, bins: int = RELIABILITY_BINS) -> pd.DataFrame:
    ev = []
    fl = rows[rows["target"] == "flip"]
    ev += [("flip", p, y) for p, y in zip(fl["p_event"], fl["observed"])]
    cr = rows[rows["target"] == "consensus"]
    if len(cr):
        for nm in names:
            # one-vs-rest: predicted P(consensus on nm) for every consensus run
            p_nm = cr.attrs.get("p", {}).get(nm)
            if p_nm is None:
                continue
            ev += [(f"consensus on {nm}", p_nm, int(o == nm)) for o in cr["observed"]]
    edges = np.linspace(0.0, 1.0, bins + 1)
    out = []
    df = pd.DataFrame(ev, columns=["target", "p", "y"])
    for tgt, g in df.groupby("target", sort=False):
        b = np.clip(np.searchsorted(edges, g["p"].to_numpy(), side="right") - 1, 0, bins - 1)
        for i in range(bins):
            m = b == i
            n = int(m.sum())
            if not n:
                continue
            k = int(g["y"].to_numpy()[m].sum())
            lo, hi = (float(v) for v in clopper_pearson(k, n))
            out.append({"target": tgt, "bin_low": edges[i], "bin_high": edges[i + 1], "n": n,
                        "mean_p": float(g["p"].to_numpy()[m].mean()), "freq": k / n, "low": lo, "high": hi})
    return pd.DataFrame(out, columns=["target", "bin_low", "bin_high", "n", "mean_p", "freq", "low", "high"])


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
                "design_runs": prediction.settings.get("design_runs"), "n_resample": nres}
    return Scores(runs=rows, coverage=coverage, reliability=rel, excluded=excluded.reset_index(drop=True),
                  settings=settings)
