"""The rivals every score of a prediction is shown beside: the simplest forecasts that use no strategy table.

A Brier score means little alone: a prediction is worth its table only where it beats what a
researcher would guess without one. :func:`normlab.calibration.score` scores, on the same runs
as the prediction,

direction rule (flips)
    "The convention the fit's runs converge to holds, the other flips": the predicted flip
    probability of a run that starts from a consensus on ``x`` and is attacked by committed
    ``y`` agents is the base rate of ``y`` below -- the share of the fit's runs from empty
    memories that ended on the challenger. With every fit run ending on ``M`` it is about 0 for
    an ``M`` majority and about 1 for a ``Q`` majority, whatever the number of committed agents.
base rate (consensus winners)
    The winners of the fit's runs from empty memories, ``p_j = (k_j + 1/2) / (n + K/2)`` over the
    ``K = W + 1`` outcomes (the names and ``"none"``; Krichevsky-Trofimov, the same smoothing
    as the prediction's own probabilities, so that no outcome gets probability 0 or 1). Both the
    direction rule and the base rate use exactly what the fit used: its runs' winners.
committed-fraction logistic (flips)
    ``logit P(flip) = b0 + b1 f + b2 d + b3 f d`` with ``f = committed / N`` and ``d`` the
    direction (majority name); for two names the four parameters are one intercept and one slope
    per direction, fitted direction by direction with Firth's penalty
    (:func:`normlab.theory.stats.firth_logistic`: finite under separation -- every ``Q``
    majority flips -- and with no tuning constant; the penalised likelihood of the interaction
    model factorises over directions). It is trained on the committed-minority runs of **another
    LLM** when the log holds one (each group of runs read within its own design length, like a
    transfer target), else **cross-validated by leaving out one run at a time** among the scored
    runs (each run predicted by the fit on all the others).
coin
    Every outcome equally likely: 1/2 for a flip (Brier 0.25, log ``ln 2``), ``1/K`` for a winner.

References
----------
G. W. Brier, Monthly Weather Review 78, 1 (1950); T. Gneiting, A. E. Raftery, JASA 102, 359
(2007); R. Krichevsky, V. Trofimov, IEEE Trans. Inf. Theory 27, 199 (1981); D. Firth,
Biometrika 80, 27 (1993); A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368
(2025): Fig. 3, Table S3, Methods "Committed Minorities".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab.schema import GameLog
from normlab.theory.stats import firth_logistic

from .observed_critical_mass import run_flips

__all__ = ["RIVALS", "RIVAL_LABELS", "FractionLogistic", "fit_fraction_logistic", "leave_one_run_out",
           "winner_counts", "base_rate", "design_rounds", "committed_flips", "from_empty"]

#: forecasters a score is compared with, in the order they are shown (``normlab`` is the prediction)
RIVALS = ("direction_rule", "logistic", "base_rate", "coin")
RIVAL_LABELS = {"normlab": "normlab", "direction_rule": "direction rule", "logistic": "committed-fraction logistic",
                "base_rate": "base rate of the fit runs", "coin": "coin"}


def from_empty(runs: pd.DataFrame) -> pd.Series:
    """Which runs start from empty memories without committed agents (the runs scored on their
    consensus winner, and whose winners make the base rate)."""
    init = runs["initial"].astype(str)
    return init.isin(["empty", "None", "nan"]) & (runs["committed_count"] == 0)


def winner_counts(log: GameLog, run_ids, outcomes) -> dict:
    """How many of the runs ``run_ids`` of ``log`` that start from empty memories ended on each
    outcome (a name of ``outcomes``; any other ending, no consensus included, is the last
    outcome, ``"none"``).

    Returns
    -------
    dict
        Outcome -> count (every outcome present).
    """
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    outcomes = [str(o) for o in outcomes]
    r = log.runs[log.runs["run"].isin([int(i) for i in run_ids])]
    r = r[from_empty(r).to_numpy()]
    out = dict.fromkeys(outcomes, 0)
    for w in r["consensus"]:
        key = str(w) if (w is not None and not (isinstance(w, float) and np.isnan(w)) and str(w) in outcomes[:-1]) \
            else outcomes[-1]
        out[key] += 1
    return out


def base_rate(counts: dict) -> dict:
    """Krichevsky-Trofimov probabilities ``(k_j + 1/2) / (n + K/2)`` of the outcomes of ``counts``.

    >>> base_rate({"Q": 0, "M": 40, "none": 0})["M"]   # doctest: +ELLIPSIS
    0.975...
    """
    n = sum(int(v) for v in counts.values())
    K = len(counts)
    if K < 2:
        raise ValueError(f"counts must hold at least two outcomes; got {list(counts)}")
    return {k: (int(v) + 0.5) / (n + 0.5 * K) for k, v in counts.items()}


# ----------------------------------------------------------------------------- the logistic
@dataclass(frozen=True)
class FractionLogistic:
    """``logit P(flip) = b0 + b1 f`` per direction (majority name), Firth-penalised.

    Attributes
    ----------
    coef : dict
        Majority name -> ``(b0, b1)``; for two directions ``(intercept, slope, direction,
        interaction)`` of the one four-parameter model are ``(b0_a, b1_a, b0_b - b0_a, b1_b - b1_a)``.
    n_runs : dict
        Majority name -> training runs.
    """

    coef: dict
    n_runs: dict = field(default_factory=dict)

    def p(self, majority, fraction) -> np.ndarray:
        """Flip probability of runs with these majorities and committed fractions (1/2 for a
        direction without training runs)."""
        maj = np.atleast_1d(np.asarray(majority, dtype=object))
        f = np.atleast_1d(np.asarray(fraction, float))
        b = np.array([self.coef.get(str(m), (0.0, 0.0)) for m in maj], float).reshape(-1, 2)
        return 1.0 / (1.0 + np.exp(-(b[:, 0] + b[:, 1] * f)))

    def summary(self) -> dict:
        return {"coef": {k: [float(v[0]), float(v[1])] for k, v in self.coef.items()},
                "n_runs": {k: int(v) for k, v in self.n_runs.items()}}


def _grouped(f, y):
    f = np.asarray(f, float)
    y = np.asarray(y, float)
    xs = np.unique(f)
    k = np.array([y[f == x].sum() for x in xs])
    n = np.array([(f == x).sum() for x in xs], float)
    return xs, k, n


def fit_fraction_logistic(majority, fraction, flipped) -> FractionLogistic:
    """Fit the committed-fraction logistic, one Firth-penalised ``(b0, b1)`` per direction.

    Parameters
    ----------
    majority : array_like of str
        Direction of each run (the name of the initial consensus).
    fraction : array_like of float
        Committed agents / N.
    flipped : array_like of bool

    Returns
    -------
    FractionLogistic

    References
    ----------
    Firth, Biometrika 80, 27 (1993).
    """
    maj = np.asarray(majority, dtype=object).astype(str)
    f = np.asarray(fraction, float)
    y = np.asarray(flipped, float)
    if not (maj.shape == f.shape == y.shape):
        raise ValueError(f"majority, fraction and flipped must have one value per run; got {maj.shape}, "
                         f"{f.shape}, {y.shape}")
    if np.any((f < 0) | (f > 1)) or not np.all(np.isfinite(f)):
        raise ValueError("fraction must lie in [0, 1]")
    coef, n = {}, {}
    for m in sorted(set(maj)):
        sel = maj == m
        xs, k, nn = _grouped(f[sel], y[sel])
        coef[m] = tuple(float(v) for v in firth_logistic(xs, k, nn))
        n[m] = int(sel.sum())
    return FractionLogistic(coef=coef, n_runs=n)


def leave_one_run_out(majority, fraction, flipped) -> np.ndarray:
    """Flip probability of every run from the logistic fitted on all the other runs (one fit per
    distinct (direction, fraction, outcome))."""
    maj = np.asarray(majority, dtype=object).astype(str)
    f = np.asarray(fraction, float)
    y = np.asarray(flipped, bool)
    out = np.full(f.shape, np.nan)
    for m in sorted(set(maj)):
        sel = np.flatnonzero(maj == m)
        xs, k, nn = _grouped(f[sel], y[sel])
        cache = {}
        for i in sel:
            key = (f[i], bool(y[i]))
            if key not in cache:
                j = int(np.searchsorted(xs, f[i]))
                kk, n2 = k.copy(), nn.copy()
                kk[j] -= float(y[i])
                n2[j] -= 1.0
                keep = n2 > 0
                b = firth_logistic(xs[keep], kk[keep], n2[keep]) if keep.any() else np.zeros(2)
                cache[key] = 1.0 / (1.0 + np.exp(-(b[0] + b[1] * f[i])))
            out[i] = cache[key]
    return out


# ----------------------------------------------------------------------------- training runs
def design_rounds(runs: pd.DataFrame) -> int:
    """The design length of committed-minority runs: median complete rounds (``n_interactions //
    N``) of those that did not stop in a consensus (0 when every run stopped)."""
    cm = runs
    open_runs = cm[cm["consensus"].isna()] if "consensus" in cm else cm
    if not len(open_runs):
        return 0
    return int((open_runs["n_interactions"] // open_runs["n_agents"].astype(int)).median())


def committed_flips(log: GameLog, names, *, within_rounds: int, exclude_models=(), models=None) -> pd.DataFrame:
    """Flip outcomes of the committed-minority runs of a name pool, each group of runs (LLM, N,
    H) read within ``min(within_rounds, its design length)`` (:func:`design_rounds`), runs too
    short to tell dropped.

    Returns
    -------
    pandas.DataFrame
        ``run``, ``model``, ``n_agents``, ``memory``, ``majority``, ``challenger``,
        ``committed``, ``fraction``, ``flipped``, ``window``.
    """
    target = frozenset(str(n) for n in names)
    r = log.runs
    m = np.array(r["names"].map(lambda s: frozenset(str(s).split(",")) == target), dtype=bool)
    m &= r["initial"].astype(str).str.startswith("consensus:").to_numpy() & (r["kind"] != "probe").to_numpy()
    if models is not None:
        m &= r["model"].isin(list(models)).to_numpy()
    if len(exclude_models):
        m &= ~r["model"].isin(list(exclude_models)).to_numpy()
    sel = r[m]
    cols = ["run", "model", "n_agents", "memory", "majority", "challenger", "committed", "fraction", "flipped",
            "window"]
    if sel.empty:
        return pd.DataFrame(columns=cols)
    frames = []
    for _, g in sel.groupby(["model", "n_agents", "memory"], sort=True):
        L = design_rounds(g)
        w = max(3, min(int(within_rounds), L) if L else int(within_rounds))
        rf = run_flips(GameLog(log.decisions[log.decisions["run"].isin(g["run"])], g), within_rounds=w)
        rf = rf[~rf["censored"].astype(bool)].copy()
        rf["fraction"] = rf["committed"] / rf["n_agents"]
        rf["window"] = w
        frames.append(rf)
    out = pd.concat(frames, ignore_index=True)
    out["flipped"] = out["flipped"].astype(bool)
    return out[cols]
