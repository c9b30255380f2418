"""Proper scoring rules and the intervals a score is read with: Brier and log scores of binary and
categorical forecasts, the Krichevsky-Trofimov probability of a finite simulation, the beta summary
of the per-draw probabilities (their Monte Carlo noise removed), the experiment-size interval and the
resolution an observed fraction is read at; the reliability diagram (no tables of runs).

The meaning of each is in :mod:`normlab.calibration.evaluate.scores`, which scores predictions with
them.

References
----------
G. W. Brier, Monthly Weather Review 78, 1 (1950); T. Gneiting, A. E. Raftery, JASA 102, 359
(2007) (proper scoring rules); R. Krichevsky, V. Trofimov, IEEE Trans. Inf. Theory 27, 199 (1981); A. Gelman, Bayesian
Analysis 1, 515 (2006) (the uniform prior on a hierarchical sd).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from normlab.theory import clopper_pearson

__all__ = ["brier_binary", "log_score_binary", "brier_categorical", "log_score_categorical", "kt_probability",
           "beta_summary", "denoised_probabilities", "experiment_interval"]

NONE = "none"
RELIABILITY_BINS = 10
SPREAD_NODES = 400  # quadrature of the between-draw spread in beta_summary


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


def beta_summary(k, n, *, nodes: int = SPREAD_NODES) -> tuple[float, float]:
    """Beta distribution of the per-draw probability behind ``k_d`` events in ``n_d`` runs.

    The draws' probabilities ``p_d`` are seen through ``k_d ~ Binomial(n_d, p_d)``; their spread
    is estimated in a beta-binomial model. Mean ``m = (sum k + 1/2) / (sum n + 1)`` (pooled,
    Krichevsky-Trofimov); the intra-draw correlation ``rho = 1 / (a + b + 1)`` of the
    beta-binomial gets a uniform prior on ``sqrt(rho)`` (uniform on the sd of ``p``, Gelman 2006)
    and its posterior mean, on ``nodes`` midpoints with ``m`` held, gives the between-draw
    variance ``tau2 = m (1 - m) E[rho | k]``. The variance returned is
    ``v = tau2 (1 + 1 / D) + m (1 - m) / sum n`` (a new draw's spread, the uncertainty of the
    mean over ``D`` draws and its Monte Carlo part); ``a = m c``, ``b = (1 - m) c`` with
    ``c = m (1 - m) / v - 1`` (at least 1e-3). Where every draw saw no event (or only events)
    the mean held at its KT value would make the likelihood favour a spread (a rare draw far from
    the rest, to carry the ``1/2`` of the KT mean): there the mean is integrated too, under its
    Jeffreys prior, jointly with ``sqrt(rho)`` (:func:`_unseen_beta`), and the beta matches the
    mean and variance of a new draw's probability. Until 2026-11-30 that branch returned the pooled
    probability's own beta (``c = sum n - 1``, mean ``0.5 / (sum n + 1)``): it gave a truth's 1 000
    runs a 0.127 chance of a flip where 200 draws of 16 runs saw none, more than one event among
    them gives (0.015), and in-family truths showed one in 0.5 % of such rows
    (``docs/validation/calibration.md``, ``(sbc-unseen)=``).

    The moment estimate ``V - B`` (variance of the frequencies minus their binomial part,
    floored at the Monte Carlo variance of the mean) that this replaced is unbiased but, with 40
    runs per draw, about as noisy as the spread it estimates; intervals built on it were too
    narrow for P(consensus) of in-family truths (``docs/validation/calibration.md``).

    Parameters
    ----------
    k, n : array_like of int
        Events and simulated runs per draw (draws with ``n_d = 0`` are ignored).
    nodes : int, optional
        Quadrature midpoints of ``sqrt(rho)`` on (0, 1).

    Returns
    -------
    (float, float)
        ``(a, b)``.
    """
    from scipy.special import betaln

    k = np.asarray(k, float).reshape(-1)
    n = np.asarray(n, float).reshape(-1)
    if k.shape != n.shape:
        raise ValueError(f"beta_summary: k and n must have one entry per draw; got {k.size} and {n.size}")
    if int(nodes) != nodes or nodes < 2:
        raise ValueError(f"beta_summary: nodes must be an integer >= 2; got {nodes!r}")
    nodes = int(nodes)
    keep = n > 0
    k, n = k[keep], n[keep]
    if not k.size:
        raise ValueError("beta_summary: no draw with a simulated run; give at least one n > 0")
    N = float(n.sum())
    m = (float(k.sum()) + 0.5) / (N + 1.0)
    if all_or_none(k, n):  # every draw all-or-none alike: the mean is not held either
        pairs, w = np.unique(n, return_counts=True)
        a, b = _unseen_beta(tuple(pairs.tolist()), tuple(w.tolist()), nodes)
        return (a, b) if not k.any() else (b, a)
    u = (np.arange(nodes) + 0.5) / nodes
    rho = u * u
    c = 1.0 / rho - 1.0
    a, b = m * c, (1.0 - m) * c
    pairs, w = np.unique(np.stack([k, n]), axis=1, return_counts=True)
    ll = np.zeros(nodes)
    for (kk, nn), cnt in zip(pairs.T, w):
        ll += cnt * (betaln(kk + a, nn - kk + b) - betaln(a, b))
    post = np.exp(ll - ll.max())
    tau2 = m * (1.0 - m) * float(post @ rho / post.sum())
    v = tau2 * (1.0 + 1.0 / k.size) + m * (1.0 - m) / N
    cc = max(m * (1.0 - m) / v - 1.0, 1e-3)
    return m * cc, (1.0 - m) * cc


def all_or_none(k, n) -> bool:
    """Whether every draw (``n_d > 0``) saw no event, or only events: :func:`beta_summary`'s branch
    without a spread to estimate."""
    k = np.asarray(k, float).reshape(-1)
    n = np.asarray(n, float).reshape(-1)
    k = k[n > 0]
    return bool(not k.any() or np.all(k == n[n > 0]))


#: Logit grid of the mean in :func:`_unseen_beta` (midpoints; the posterior of a mean no draw
#: has seen an event of lies between 1e-12 and 1 - 1e-12 whatever the draws).
UNSEEN_LOGIT = (-28.0, 28.0, 280)


@functools.lru_cache(maxsize=64)
def _unseen_beta(n_values: tuple, n_draws: tuple, nodes: int) -> tuple[float, float]:
    """``(a, b)`` of a new draw's probability where no draw saw an event: draws with ``n_values[i]``
    runs, ``n_draws[i]`` of them, all ``k = 0``.

    The beta-binomial of :func:`beta_summary` with both its parameters integrated: the mean ``m``
    under Jeffreys' ``Beta(1/2, 1/2)`` (on a midpoint grid of ``logit m``, :data:`UNSEEN_LOGIT`) and
    ``sqrt(rho)`` uniform on (0, 1) (``nodes`` midpoints). A new draw's ``p`` has posterior mean
    ``E[m]`` and second moment ``E[m (m c + 1) / (c + 1)]``; the beta returned has that mean and
    variance. A pure function of its arguments (cached: predictions meet the same draws at every
    count).
    """
    from scipy.special import betaln, expit

    lo, hi, nm = UNSEEN_LOGIT
    t = lo + (np.arange(nm) + 0.5) * (hi - lo) / nm
    m = expit(t)[:, None]
    u = (np.arange(nodes) + 0.5) / nodes
    c = (1.0 / (u * u) - 1.0)[None, :]
    a, b = m * c, (1.0 - m) * c
    ll = 0.5 * (np.log(m) + np.log1p(-m))  # Jeffreys' density times dm/dt = m (1 - m)
    base = betaln(a, b)
    for nn, cnt in zip(n_values, n_draws):
        ll = ll + cnt * (betaln(a, b + nn) - base)
    w = np.exp(ll - ll.max())
    w /= w.sum()
    mean = float((w * m).sum())
    var = float((w * (m * (a + 1.0) / (c + 1.0))).sum()) - mean * mean
    cc = max(mean * (1.0 - mean) / var - 1.0, 1e-3)
    return mean * cc, (1.0 - mean) * cc


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


def _distinct(a: float, b: float) -> tuple[str, str]:
    """Two scores with enough decimals (3 to 6) to tell them apart."""
    for d in range(3, 7):
        x, y = f"{a:.{d}f}", f"{b:.{d}f}"
        if x != y:
            return x, y
    return x, y


def _digits(diff: float, se: float) -> int:
    m = max(abs(diff) if np.isfinite(diff) else 0.0, se if np.isfinite(se) else 0.0)
    return 3 if m >= 0.01 or m == 0 else min(6, 2 - int(math.floor(math.log10(m))))


def _binomial_interval(p: float, n: int, level: float) -> tuple[int, int]:
    """Equal-tailed interval of a binomial count (the convention of :func:`experiment_interval`)."""
    from scipy.stats import binom

    x = np.arange(int(n) + 1)
    cdf = np.cumsum(binom.pmf(x, int(n), float(p)))
    al = (1.0 - level) / 2.0
    return int(np.searchsorted(cdf, al - 1e-12)), min(int(np.searchsorted(cdf, 1.0 - al - 1e-12)), int(n))


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
