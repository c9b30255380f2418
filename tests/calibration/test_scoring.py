"""Scores of predictions against observed runs (normlab.calibration.scoring).

Exact tier: the scoring rules, the Krichevsky-Trofimov predictive, the beta summary and the
experiment interval against hand-computed values; the per-run scores of :func:`score` on a
prediction whose per-draw counts are set by hand, against observed runs simulated with a table.
Logic tier: coverage at the resolution of the experiment, exclusion of fitted, censored and
unpredicted runs, the result API.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from normlab.calibration import predict, score
from normlab.calibration.evaluate.scoring_rules import _unseen_beta
from normlab.calibration.observed_critical_mass import run_flips
from normlab.calibration.scoring import (
    _covers_at_resolution,
    beta_summary,
    brier_binary,
    brier_categorical,
    denoised_probabilities,
    experiment_interval,
    kt_probability,
    log_score_binary,
    log_score_categorical,
)
from normlab.schema import GameLog
from normlab.theory import strategy_game
from normlab.theory.strategies import BestResponse


def test_scoring_rules_hand_computed():
    assert kt_probability(3, 10) == pytest.approx(3.5 / 11, abs=0)
    assert kt_probability(0, 8, 3) == pytest.approx(0.5 / 9.5, abs=0)
    assert brier_binary(0.3, 1) == pytest.approx(0.49)
    assert brier_binary(0.3, 0) == pytest.approx(0.09)
    assert log_score_binary(0.3, 0) == pytest.approx(-math.log(0.7))
    assert log_score_binary(0.3, 1) == pytest.approx(-math.log(0.3))
    assert brier_categorical([0.5, 0.3, 0.2], 1) == pytest.approx(0.25 + 0.49 + 0.04)
    assert log_score_categorical([0.5, 0.3, 0.2], 2) == pytest.approx(-math.log(0.2))
    # the uninformed references of Scores.summary
    assert brier_binary(0.5, 1) == 0.25 and brier_categorical([1 / 3] * 3, 0) == pytest.approx(2 / 3)


def _beta_summary_reference(k, n):
    """beta_summary by adaptive quadrature (scipy.integrate.quad) of the posterior of sqrt(rho)."""
    from scipy.integrate import quad
    from scipy.special import betaln

    k, n = np.asarray(k, float), np.asarray(n, float)
    N = n.sum()
    m = (k.sum() + 0.5) / (N + 1)

    def loglik(u):
        c = 1 / (u * u) - 1
        return float(np.sum(betaln(k + m * c, n - k + (1 - m) * c) - betaln(m * c, (1 - m) * c)))

    top = max(loglik(u) for u in np.linspace(0.001, 0.999, 999))
    w = lambda u: math.exp(loglik(u) - top)  # noqa: E731
    pts = list(np.linspace(0.01, 0.99, 25))
    z = quad(w, 0, 1, points=pts, limit=500)[0]
    er = quad(lambda u: u * u * w(u), 0, 1, points=pts, limit=500)[0] / z
    v = m * (1 - m) * er * (1 + 1 / k.size) + m * (1 - m) / N
    c = max(m * (1 - m) / v - 1, 1e-3)
    return m * c, (1 - m) * c


def test_beta_summary_matches_its_quadrature_reference():
    for k, n in (([3, 4], [4, 4]), ([4, 12], [16, 16]), ([38, 40, 40, 39, 40], [40] * 5),
                 ([0, 0, 1], [10, 10, 10]), ([12, 20, 25, 31, 8, 17], [40] * 6)):
        a, b = beta_summary(k, n)
        ra, rb = _beta_summary_reference(k, n)
        assert a / (a + b) == pytest.approx(ra / (ra + rb), rel=1e-12)  # the pooled KT mean, exactly
        assert a + b == pytest.approx(ra + rb, rel=2e-3), (k, n)
    # no events anywhere (or only events): the mean integrated too (test_unseen_beta_*), mirrored
    a, b = beta_summary([0, 0, 0], [10, 10, 10])
    assert (a, b) == _unseen_beta((10,), (3,), 400) and a < b
    assert beta_summary([10, 10, 10], [10, 10, 10]) == (b, a)
    # draws at 0 and at 1: a U-shaped beta; draws with no run are ignored
    a, b = beta_summary([0, 20, 5], [20, 20, 0])
    assert a < 1 and b < 1
    with pytest.raises(ValueError, match="one entry per draw"):
        beta_summary([1, 2], [4])
    with pytest.raises(ValueError, match="no draw"):
        beta_summary([0], [0])
    with pytest.raises(ValueError, match="nodes must be an integer >= 2"):
        beta_summary([1, 2], [4, 4], nodes=1)


def _unseen_reference(n, D):
    """Mean and variance of a new draw's p where D draws of n runs saw no event, by adaptive 2-D
    quadrature (scipy.integrate.dblquad) over logit m (Jeffreys) and sqrt(rho) (uniform)."""
    from scipy.integrate import dblquad
    from scipy.special import betaln, expit

    def logw(t, u):
        m, c = expit(t), 1 / (u * u) - 1
        return 0.5 * (math.log(m) + math.log1p(-m)) + D * (betaln(m * c, (1 - m) * c + n) - betaln(m * c, (1 - m) * c))

    grid = [(t, u) for t in np.linspace(-27, 27, 109) for u in np.linspace(0.01, 0.99, 50)]
    top = max(logw(t, u) for t, u in grid)

    def moment(f):
        return dblquad(lambda u, t: f(t, u) * math.exp(logw(t, u) - top), -28, 28, 1e-6, 1 - 1e-6,
                       epsabs=0, epsrel=1e-7)[0]

    z = moment(lambda t, u: 1.0)
    mean = moment(lambda t, u: expit(t)) / z
    ep2 = moment(lambda t, u: expit(t) * (expit(t) * (1 / (u * u) - 1) + 1) / (1 / (u * u))) / z
    return mean, ep2 - mean * mean


@pytest.mark.parametrize("n, D", [(10, 3), (16, 200)])
def test_unseen_beta_matches_its_quadrature_reference(n, D):
    """Draws that all saw no event: the beta has the mean and variance of a new draw's probability
    under the joint posterior of (m, sqrt(rho)), to 1e-3 of an adaptive 2-D quadrature."""
    a, b = beta_summary(np.zeros(D), np.full(D, n))
    mean, var = _unseen_reference(n, D)
    assert a / (a + b) == pytest.approx(mean, rel=1e-3)
    assert a * b / ((a + b) ** 2 * (a + b + 1)) == pytest.approx(var, rel=1e-3)


def test_unseen_beta_is_no_wider_than_one_event():
    """Seeing no event in any of 200 draws of 16 runs never leaves more room for events in an
    experiment than seeing one: P(at least one event in K runs) is smaller for K = 10 ... 10 000.
    The pooled beta this branch replaced gave 0.127 at K = 1 000 against one event's 0.015."""
    from scipy.stats import betabinom

    n = np.full(200, 16)
    a0, b0 = beta_summary(np.zeros(200), n)
    a1, b1 = beta_summary(np.r_[1, np.zeros(199)], n)
    for K in (10, 40, 1000, 10000):
        assert 1 - betabinom.pmf(0, K, a0, b0) < 1 - betabinom.pmf(0, K, a1, b1), K
    assert 1 - betabinom.pmf(0, 1000, a0, b0) < 0.01


@pytest.mark.slow
def test_unseen_beta_is_calibrated_on_its_own_prior():
    """Simulation-based calibration of the all-zero branch: (m, sqrt(rho)) from the priors, 201
    tables' p from the beta, 200 seen through 16 runs; where all 200 saw none, the 201st's count
    in 1 000 runs has a randomised rank inside the central 80 % (95 %) in 0.76-0.84 (0.93-0.97) of
    the cases (1 909 of 100 000: 0.800 / 0.940). The pooled beta it replaced (c = N - 1, mean
    0.5 / (N + 1)) fails here: 0.883 at 80 %, as in bench_coverage's in-family truths (0.881)."""
    from scipy.stats import betabinom

    g = np.random.default_rng(20261130)
    D, n, K = 200, 16, 1000
    a, b = beta_summary(np.zeros(D), np.full(D, n))
    kt = []
    for _ in range(10):
        m, u = g.beta(0.5, 0.5, 10_000), g.random(10_000)
        c = 1 / (u * u) - 1
        p = g.beta(np.maximum(m * c, 1e-300), np.maximum((1 - m) * c, 1e-300), size=(D + 1, 10_000))
        seen_none = ~g.binomial(n, p[:D]).any(axis=0)
        kt.append(g.binomial(K, p[D, seen_none]))
    kt = np.concatenate(kt)
    assert kt.size > 1000
    uu = g.random(kt.size)
    pit = np.where(kt > 0, betabinom.cdf(kt - 1, K, a, b), 0.0) + uu * betabinom.pmf(kt, K, a, b)
    for L, lo, hi in ((0.8, 0.76, 0.84), (0.95, 0.93, 0.97)):
        share = np.mean(((1 - L) / 2 <= pit) & (pit <= (1 + L) / 2))
        assert lo <= share <= hi, (L, share, kt.size)
    N = D * n
    a0, b0 = 0.5 / (N + 1) * (N - 1), (N + 0.5) / (N + 1) * (N - 1)
    pit0 = np.where(kt > 0, betabinom.cdf(kt - 1, K, a0, b0), 0.0) + uu * betabinom.pmf(kt, K, a0, b0)
    assert np.mean((0.1 <= pit0) & (pit0 <= 0.9)) > 0.86


@pytest.mark.parametrize("mu, rho", [(0.9, 0.02), (0.98, 0.003)])
def test_beta_summary_intervals_cover_a_new_draw(mu, rho):
    """Statistical: 200 draws seen through 40 runs each (predict's consensus), a 201st draw's
    probability inside the 95 % interval in 90-98 % of 600 replicates (2 000 replicates gave 0.936
    and 0.920; binomial sd of 600: 0.9-1.1 %). The moment estimate floored at the mean's Monte Carlo
    variance, which this replaced, covered 0.79 at (0.98, 0.003)."""
    from scipy.stats import beta as B

    g = np.random.default_rng(20261129)
    c = 1 / rho - 1
    hit = []
    for _ in range(600):
        p = g.beta(mu * c, (1 - mu) * c, size=201)
        a, b = beta_summary(g.binomial(40, p[:200]), np.full(200, 40))
        hit.append(B.ppf(0.025, a, b) <= p[200] <= B.ppf(0.975, a, b))
    assert 0.90 <= np.mean(hit) <= 0.98


def test_experiment_interval_is_the_beta_binomial_quantile():
    from scipy.stats import betabinom

    for a, b, n in ((35 / 6, 7 / 6, 10), (2.0, 3.0, 7), (0.3, 0.3, 5)):
        lo, hi = experiment_interval(a, b, n, 0.95)
        cdf = np.cumsum(betabinom.pmf(np.arange(n + 1), n, a, b))
        assert lo == int(np.flatnonzero(cdf >= 0.025)[0]) and hi == int(np.flatnonzero(cdf >= 0.975)[0])
    # a sharp beta gives the binomial: Binomial(10, 1/2) has 2.5 % and 97.5 % quantiles 2 and 8
    assert experiment_interval(1e7, 1e7, 10) == (2, 8)


def test_denoised_probabilities():
    f = denoised_probabilities([2, 2, 2], [8, 8, 8])
    assert np.array_equal(f, [0.25, 0.25, 0.25])
    k, n = np.array([0, 4, 8, 16]), np.full(4, 16)
    p = denoised_probabilities(k, n)
    assert p.mean() == pytest.approx((k / n).mean())
    fr = k / n
    V, B = fr.var(ddof=1), np.mean(fr * (1 - fr) / 15)
    assert p.var(ddof=1) == pytest.approx(V - B)
    assert np.all(np.diff(p) > 0) and p.min() >= 0 and p.max() <= 1


def test_coverage_at_the_resolution_of_the_experiment():
    # an interval of a probability, read by 10 runs: 0.001 can only read 0/10; [0.948, 0.996]
    # reads 9/10 or 10/10
    assert _covers_at_resolution(0.0003, 0.004, 0, 10)
    assert not _covers_at_resolution(0.0003, 0.004, 1, 10)
    assert _covers_at_resolution(0.948, 0.996, 9, 10) and _covers_at_resolution(0.948, 0.996, 10, 10)
    assert not _covers_at_resolution(0.948, 0.996, 6, 10)


# ----------------------------------------------------------------------------- score()
NAMES = ("A", "B")


@pytest.fixture(scope="module")
def observed():
    """Committed runs at counts 1, 2 and 3 (3 is not predicted), short runs at count 1 (censored
    unless flipped) and convergence runs, all N = 6, H = 2, best response."""
    br = BestResponse(2).to_table(2, names=NAMES)
    kw = dict(n_agents=6, memory=2, committed_name="B", initial="consensus:A", stop="max", record_decisions=True)
    parts = [strategy_game(br, committed=c, n_runs=r, max_interactions=T * 6, rng=s, **kw).to_log()
             for c, r, T, s in ((1, 6, 12, 1), (2, 8, 12, 2), (3, 2, 12, 3), (1, 3, 5, 4))]
    parts.append(strategy_game(br, n_agents=6, memory=2, n_runs=6, stop="streak", max_interactions=200 * 6,
                               record_decisions=True, rng=5).to_log())
    return GameLog.concat(parts)


@pytest.fixture(scope="module")
def hand_prediction():
    br = BestResponse(2).to_table(2, names=NAMES)
    p = predict(br, n_agents=6, n_draws=2, within_rounds=10, committed=[1, 2], n_runs_flip=4, n_runs_consensus=4,
                strength=False, max_rounds=50, rng=0)
    # per-draw counts set by hand: overturn A at 1: 1 and 0 flips of 4; at 2: 3 and 4 of 4
    fl = p.flips.copy()
    kx = {(0, "A", 1): 1, (1, "A", 1): 0, (0, "A", 2): 3, (1, "A", 2): 4}
    fl["n_flips"] = [kx.get((d, x, c), 2) for d, x, c in zip(fl["draw"], fl["majority"], fl["committed"])]
    fl["n_runs"] = 4
    fl["published_success"] = fl["committed"] == 2
    cons = pd.DataFrame({"draw": [0, 0, 0, 1, 1, 1], "name": ["A", "B", "none"] * 2, "runs": [3, 1, 0, 2, 1, 1],
                         "n_runs": 4})
    return dataclasses.replace(p, flips=fl, consensus=cons)


def test_score_matches_hand_computed_scores(observed, hand_prediction):
    sc = score(hand_prediction, observed, rng=0)
    rf = run_flips(observed, within_rounds=10).set_index("run")
    runs = sc.runs.set_index("run")
    p_c = {1: 1.5 / 9, 2: 7.5 / 9}  # (k + 1/2) / (n + 1): 1 of 8 and 7 of 8
    fl = runs[runs["target"] == "flip"]
    assert len(fl) > 0
    y = rf.loc[fl.index, "flipped"].astype(float)
    p = rf.loc[fl.index, "committed"].map(p_c)
    assert fl["brier"].to_numpy() == pytest.approx(((p - y) ** 2).to_numpy(), abs=1e-15)
    assert fl["log_score"].to_numpy() == pytest.approx(-np.log(np.where(y == 1, p, 1 - p)), abs=1e-14)
    pc = np.array([5.5, 2.5, 1.5]) / 9.5  # A, B, none: (k + 1/2) / (8 + 3/2)
    cr = runs[runs["target"] == "consensus"]
    assert len(cr) == 6
    for _, r in cr.iterrows():
        j = ["A", "B", "none"].index(r["observed"])
        onehot = np.eye(3)[j]
        assert r["brier"] == pytest.approx(((pc - onehot) ** 2).sum(), abs=1e-15)
        assert r["log_score"] == pytest.approx(-math.log(pc[j]), abs=1e-15)
    s = sc.summary()
    assert s["brier_flip"] == pytest.approx(fl["brier"].mean()) and s["brier_consensus"] == pytest.approx(cr["brier"].mean())
    assert s["n_flip_runs"] == len(fl) and s["n_consensus_runs"] == 6
    assert s["reference"]["brier_consensus"] == pytest.approx(2 / 3)
    # count 3 is not predicted; short unflipped runs are censored
    ex = sc.excluded.set_index("run")["reason"]
    obs_runs = observed.runs.set_index("run")
    assert set(ex[ex == "count not predicted"].index) == set(obs_runs.index[obs_runs["committed_count"] == 3])
    short = rf[(rf["rounds"] < 10) & ~rf["flipped"]].index
    assert set(ex[ex == "censored"].index) == set(short) and len(short) > 0


def test_coverage_rows(observed, hand_prediction):
    sc = score(hand_prediction, observed, rng=0)
    cv = sc.coverage
    rf = run_flips(observed, within_rounds=10)
    ok = rf[~rf["censored"] & rf["committed"].isin([1, 2])]
    # flip fraction at count 2: the beta of (3, 4 of 4) and its beta-binomial of n_obs runs
    o2 = ok[ok["committed"] == 2]
    a, b = beta_summary([3, 4], [4, 4])
    lo, hi = experiment_interval(a, b, len(o2))
    row = cv[(cv["quantity"] == "flip_fraction") & (cv["committed"] == 2) & (cv["interval"] == "experiment")].iloc[0]
    assert (row["low"], row["high"]) == (lo / len(o2), hi / len(o2))
    assert row["covered"] == (lo <= o2["flipped"].sum() <= hi)
    # per-run critical mass: every draw's flip probability is below 1/2 at count 1 and above at
    # count 2, so both intervals are [2, 2]
    frac = ok.groupby("committed")["flipped"].mean()
    obs_cm = float(frac.index[frac >= 0.5][0]) if (frac >= 0.5).any() else math.inf
    for kind in ("underlying", "experiment"):
        r = cv[(cv["quantity"] == "critical_mass_per_run") & (cv["interval"] == kind)].iloc[0]
        assert (r["low"], r["high"]) == (2.0, 2.0) and r["observed"] == obs_cm
        assert r["covered"] == (obs_cm == 2.0)
    # published rule: the hand-set per-draw successes make it 2 in every draw
    pub = cv[cv["quantity"] == "critical_mass_published"]
    assert len(pub) <= 1 and (pub.empty or (pub.iloc[0]["low"], pub.iloc[0]["high"]) == (2.0, 2.0))
    # consensus: underlying and experiment rows for every outcome
    pcv = cv[cv["quantity"] == "p_consensus"]
    assert sorted(pcv["key"].unique()) == ["A", "B", "none"] and len(pcv) == 6


def test_fitted_runs_are_not_scored(observed, hand_prediction):
    cons = observed.runs.loc[observed.runs["initial"] == "empty", "run"].tolist()
    sc = score(hand_prediction, observed, exclude=cons, rng=0)
    assert sc.summary()["n_consensus_runs"] == 0 and sc.summary()["brier_consensus"] is None
    assert set(sc.excluded.loc[sc.excluded["reason"] == "used by the fit", "run"]) == set(cons)
    with pytest.raises(ValueError, match="no run to score"):
        score(hand_prediction, observed, exclude=observed.runs["run"], rng=0)
    with pytest.raises(ValueError, match="no run to score"):
        score(hand_prediction, observed, llm="some other model")


def test_scores_api(observed, hand_prediction):
    import matplotlib

    matplotlib.use("Agg")
    sc = score(hand_prediction, observed, rng=0)
    f = sc.to_frame()
    assert list(f.columns) == ["metric", "target", "majority", "committed", "forecaster", "value", "n"]
    assert {"brier", "log_score", "coverage", "zero_width"} <= set(f["metric"])
    per_count = f[(f["metric"] == "brier") & (f["target"] == "flip") & f["committed"].notna()
                  & (f["forecaster"] == "normlab")]
    assert sorted(per_count["committed"]) == [1.0, 2.0]
    # the rivals score the same runs: same counts per group as normlab
    n = f[(f["metric"] == "brier") & f["committed"].isna()].pivot_table(index="target", columns="forecaster",
                                                                          values="n")
    assert (n["logistic"].dropna() == n.loc[n["logistic"].notna(), "normlab"]).all()
    assert n.loc["consensus", "coin"] == n.loc["consensus", "normlab"]
    rel = sc.reliability
    assert rel.loc[rel["target"] == "flip", "n"].sum() == sc.summary()["n_flip_runs"]
    assert set(rel.loc[rel["target"] == "flip", "bin_low"].round(1)) <= {0.1, 0.8}
    assert "Scores(" in repr(sc) and "<table" in sc._repr_html_()
    ax = sc.plot()
    assert ax.get_xlabel() == "predicted probability"
    with pytest.raises(TypeError, match="GameLog"):
        score(hand_prediction, observed.runs)
    with pytest.raises(TypeError, match="Prediction"):
        score({}, observed)


def test_calibrate_summary_prints_the_scores_block(observed, hand_prediction):
    from normlab.calibration._cli import format_summary

    s = score(hand_prediction, observed, rng=0).summary()
    text = format_summary({"names": ["A", "B"], "n_agents": 6, "memory": 2, "scores": s})
    assert "scores on the runs the fit did not use" in text
    assert f"normlab:{' ' * 31}Brier {s['brier_flip']:.3f}, log {s['log_score_flip']:.3f}" in text
    assert "coin (every outcome equally likely):   Brier 0.250, log 0.693" in text
    assert f"{s['n_consensus_runs']} runs" in text
    assert "experiment" in text and "not scored:" in text and "censored" in text
