"""The rivals every score is shown beside (normlab.calibration.rivals and their use in score()).

Exact tier: the base rate against hand-computed Krichevsky-Trofimov probabilities; the
committed-fraction logistic against a direct Firth fit of the four-parameter interaction model
(intercept, slope, direction, interaction) -- the per-direction fits are that model; leave-one-run-out
against refitting without each run; the rivals' per-run scores in :func:`score` against
hand-computed ones. Logic tier: what the rivals are trained on (another LLM's runs, else
leave-one-run-out), the paired comparison, zero-width shares, the rivals' coverage, the
sentences that say where a rival beats normlab, and the printed block.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from normlab.calibration import predict, score
from normlab.calibration.rivals import (
    base_rate,
    committed_flips,
    design_rounds,
    fit_fraction_logistic,
    leave_one_run_out,
    winner_counts,
)
from normlab.calibration.scoring import _binomial_interval, rival_wins
from normlab.schema import GameLog
from normlab.theory import strategy_game
from normlab.theory.strategies import BestResponse
from normlab.theory.stats import firth_logistic

NAMES = ("A", "B")


def _firth_design(X, y, iters=200):
    """Firth-penalised logistic regression on a full design matrix (Newton on the penalised score)."""
    X = np.asarray(X, float)
    y = np.asarray(y, float)
    b = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(X @ b)))
        w = p * (1 - p)
        info = X.T @ (X * w[:, None])
        inv = np.linalg.inv(info)
        h = w * np.einsum("ij,jk,ik->i", X, inv, X)
        step = inv @ (X.T @ (y - p + h * (0.5 - p)))
        m = np.abs(step).max()
        b = b + (step * 5 / m if m > 5 else step)
        if m < 1e-12:
            break
    return b


# ----------------------------------------------------------------------------- exact tier
def test_base_rate_is_krichevsky_trofimov():
    p = base_rate({"Q": 0, "M": 40, "none": 0})
    assert p == pytest.approx({"Q": 0.5 / 41.5, "M": 40.5 / 41.5, "none": 0.5 / 41.5}, abs=0)
    assert sum(p.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="two outcomes"):
        base_rate({"M": 3})


def test_fraction_logistic_is_the_four_parameter_interaction_model():
    rng = np.random.default_rng(4)
    n = 120
    maj = rng.choice(["M", "Q"], n)
    f = rng.choice([0.0, 1 / 24, 2 / 24, 4 / 24, 6 / 24, 10 / 24], n)
    eta = np.where(maj == "M", -4 + 25 * f, 1 + 8 * f)
    y = rng.random(n) < 1 / (1 + np.exp(-eta))
    lg = fit_fraction_logistic(maj, f, y)
    d = (maj == "Q").astype(float)
    X = np.column_stack([np.ones(n), f, d, f * d])  # intercept, slope, direction, interaction
    b = _firth_design(X, y)
    (a0, a1), (q0, q1) = lg.coef["M"], lg.coef["Q"]
    assert [a0, a1, q0 - a0, q1 - a1] == pytest.approx(b, abs=1e-7)
    # and each direction is the shared one-covariate Firth fit on grouped counts
    xs = np.unique(f[maj == "M"])
    k = [y[(maj == "M") & (f == x)].sum() for x in xs]
    nn = [((maj == "M") & (f == x)).sum() for x in xs]
    assert lg.coef["M"] == pytest.approx(tuple(firth_logistic(xs, k, nn)), abs=0)
    assert lg.p(["M"], [0.1])[0] == pytest.approx(1 / (1 + math.exp(-(a0 + a1 * 0.1))))
    assert lg.p(["X"], [0.3])[0] == 0.5  # no training run in that direction: 1/2
    # separation (every Q majority flips) stays finite, below 1
    lg2 = fit_fraction_logistic(["Q"] * 6 + ["M"] * 6, [0.1] * 3 + [0.2] * 3 + [0.1] * 6, [1] * 6 + [0, 1] * 3)
    assert 0.5 < lg2.p(["Q"], [0.15])[0] < 1.0 and np.all(np.isfinite(lg2.coef["Q"]))
    with pytest.raises(ValueError, match="one value per run"):
        fit_fraction_logistic(["M"], [0.1, 0.2], [1, 0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_fraction_logistic(["M"], [1.5], [1])


def test_leave_one_run_out_refits_without_each_run():
    maj = np.array(["M"] * 7 + ["Q"] * 5)
    f = np.array([0.05, 0.05, 0.1, 0.1, 0.2, 0.2, 0.3, 0.05, 0.1, 0.1, 0.2, 0.3])
    y = np.array([0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1], bool)
    p = leave_one_run_out(maj, f, y)
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        lg = fit_fraction_logistic(maj[keep], f[keep], y[keep])
        assert p[i] == pytest.approx(lg.p([maj[i]], [f[i]])[0], abs=1e-12)


# ----------------------------------------------------------------------------- score() with rivals
@pytest.fixture(scope="module")
def observed():
    """Committed runs at counts 1 and 2 (majority A, challenger B) and convergence runs, N = 6, H = 2."""
    br = BestResponse(2).to_table(2, names=NAMES)
    kw = dict(n_agents=6, memory=2, committed_name="B", initial="consensus:A", stop="max", record_decisions=True)
    parts = [strategy_game(br, committed=c, n_runs=r, max_interactions=12 * 6, rng=s, **kw).to_log()
             for c, r, s in ((1, 6, 1), (2, 8, 2))]
    parts.append(strategy_game(br, n_agents=6, memory=2, n_runs=8, stop="streak", max_interactions=200 * 6,
                               record_decisions=True, rng=5).to_log())
    return GameLog.concat(parts)


@pytest.fixture(scope="module")
def hand_prediction():
    br = BestResponse(2).to_table(2, names=NAMES)
    p = predict(br, n_agents=6, n_draws=2, within_rounds=10, committed=[1, 2], n_runs_flip=4, n_runs_consensus=4,
                strength=False, max_rounds=50, rng=0)
    fl = p.flips.copy()
    kx = {(0, "A", 1): 1, (1, "A", 1): 0, (0, "A", 2): 3, (1, "A", 2): 4}
    fl["n_flips"] = [kx.get((d, x, c), 2) for d, x, c in zip(fl["draw"], fl["majority"], fl["committed"])]
    fl["n_runs"] = 4
    fl["published_success"] = fl["committed"] == 2
    cons = pd.DataFrame({"draw": [0, 0, 0, 1, 1, 1], "name": ["A", "B", "none"] * 2, "runs": [3, 1, 0, 2, 1, 1],
                         "n_runs": 4})
    return dataclasses.replace(p, flips=fl, consensus=cons)


def _fit_runs(log, k=4):
    return log.runs.loc[log.runs["initial"] == "empty", "run"].to_numpy()[:k]


def test_direction_rule_and_base_rate_use_the_fit_runs_winners(observed, hand_prediction):
    fit_ids = _fit_runs(observed)
    sc = score(hand_prediction, observed, exclude=fit_ids, rng=0)
    counts = winner_counts(observed, fit_ids, ["A", "B", "none"])
    assert sum(counts.values()) == 4
    p = base_rate(counts)
    rv = sc.rivals
    dr = rv[rv["forecaster"] == "direction_rule"]
    own = sc.runs[sc.runs["target"] == "flip"]
    assert len(dr) == len(own) and set(dr["run"]) == set(own["run"])
    # majority A attacked by B: P(flip) = the base rate of B among the fit runs' winners
    assert np.all(dr["p_event"] == p["B"])
    y = dr["observed"].to_numpy(float)
    assert dr["brier"].to_numpy() == pytest.approx((p["B"] - y) ** 2, abs=1e-15)
    assert dr["log_score"].to_numpy() == pytest.approx(-np.log(np.where(y == 1, p["B"], 1 - p["B"])), abs=1e-14)
    # winners of the other runs against the base rate, and the coin
    br = rv[rv["forecaster"] == "base_rate"]
    cr = sc.runs[sc.runs["target"] == "consensus"]
    assert len(br) == len(cr) == 4
    pv = np.array([p["A"], p["B"], p["none"]])
    for _, r in br.iterrows():
        j = ["A", "B", "none"].index(r["observed"])
        assert r["brier"] == pytest.approx(((pv - np.eye(3)[j]) ** 2).sum(), abs=1e-15)
        assert r["log_score"] == pytest.approx(-math.log(pv[j]), abs=1e-15)
    coin = rv[(rv["forecaster"] == "coin") & (rv["target"] == "flip")]
    assert np.all(coin["brier"] == 0.25)
    s = sc.summary()
    assert s["rivals"]["direction_rule"]["brier_flip"] == pytest.approx(dr["brier"].mean())
    assert s["rivals"]["base_rate"]["p"] == pytest.approx(p)
    assert s["rivals"]["coin"]["brier_flip"] == 0.25 and s["reference"]["brier_flip"] == 0.25
    strong = max(["A", "B"], key=lambda nm: counts[nm])
    assert sc.settings["rivals"]["strong"] == (strong if counts["A"] != counts["B"] else None)


def test_without_fit_runs_the_rules_say_why(observed, hand_prediction):
    sc = score(hand_prediction, observed, rng=0)
    assert set(sc.rivals["forecaster"]) == {"logistic", "coin"}
    s = sc.summary()
    assert "no fit run from empty memories" in s["rivals"]["direction_rule"]["unavailable"]
    assert s["rivals"]["direction_rule"]["brier_flip"] is None


def test_logistic_leaves_one_run_out_unless_another_llm_has_runs(observed, hand_prediction):
    sc = score(hand_prediction, observed, exclude=_fit_runs(observed), rng=0)
    own = sc.runs[sc.runs["target"] == "flip"].sort_values("run")
    lo = sc.rivals[sc.rivals["forecaster"] == "logistic"].set_index("run").loc[own["run"]]
    expect = leave_one_run_out(own["majority"], own["committed"] / 6, own["observed"].astype(bool))
    assert lo["p_event"].to_numpy() == pytest.approx(expect, abs=1e-12)
    assert sc.settings["rivals"]["logistic"]["trained_on"] == "leave one run out"
    # another LLM's committed runs in the log: the logistic is trained on them, not on the scored runs
    other = GameLog(observed.decisions.copy(), observed.runs.assign(model="other LLM"))
    both = GameLog.concat([observed, other])
    mine = sorted(set(observed.runs["model"]))
    sc2 = score(hand_prediction, both, exclude=_fit_runs(both), llm=mine, rng=0)
    info = sc2.settings["rivals"]["logistic"]
    assert info["trained_on"] == "other LLM" and info["models"] == ["other LLM"]
    train = committed_flips(both, NAMES, within_rounds=10, exclude_models=mine)
    lg = fit_fraction_logistic(train["majority"], train["fraction"], train["flipped"])
    r2 = sc2.rivals[sc2.rivals["forecaster"] == "logistic"]
    assert r2["p_event"].to_numpy() == pytest.approx(lg.p(r2["majority"], r2["committed"].astype(float) / 6),
                                                     abs=1e-12)
    assert set(train["model"]) == {"other LLM"} and (train["window"] == 10).all()


def test_committed_flips_read_each_group_within_its_design_length(observed):
    cm = observed.runs[observed.runs["initial"].astype(str).str.startswith("consensus:")]
    L = design_rounds(cm)
    assert L == 12  # every committed run lasted 12 rounds without stopping
    tf = committed_flips(observed, NAMES, within_rounds=30)
    assert (tf["window"] == 12).all() and len(tf) == len(cm)  # the runs' own 12 rounds: none censored
    assert np.array_equal(tf["fraction"], tf["committed"] / 6)


def test_comparison_is_paired_on_the_same_runs(observed, hand_prediction):
    sc = score(hand_prediction, observed, exclude=_fit_runs(observed), rng=0)
    c = sc.comparison()
    fc = sc.forecasts()
    for _, r in c[c["forecaster"] != "normlab"].iterrows():
        g = fc[(fc["target"] == r["target"])]
        if r["majority"] != "all":
            g = g[g["majority"] == r["majority"]]
        a = g[g["forecaster"] == r["forecaster"]].set_index("run")["brier"]
        b = g[g["forecaster"] == "normlab"].set_index("run")["brier"].reindex(a.index)
        assert r["n"] == len(a) and r["brier"] == pytest.approx(a.mean())
        assert r["brier_diff"] == pytest.approx((a - b).mean())
        assert r["brier_diff_se"] == pytest.approx((a - b).std(ddof=1) / math.sqrt(len(a)))
    # groups: all flips, the one direction (A), the winners
    assert set(zip(c["target"], c["majority"])) == {("flip", "all"), ("flip", "A"), ("consensus", "all")}


def test_rival_wins_say_it_plainly():
    comp = pd.DataFrame([
        {"target": "flip", "majority": "M", "convention": "strong", "forecaster": "normlab", "n": 67, "brier": 0.18,
         "log_score": 0.60, "brier_diff": np.nan, "brier_diff_se": np.nan, "log_diff": np.nan, "log_diff_se": np.nan},
        {"target": "flip", "majority": "M", "convention": "strong", "forecaster": "logistic", "n": 67, "brier": 0.15,
         "log_score": 0.70, "brier_diff": -0.03, "brier_diff_se": 0.02, "log_diff": 0.1, "log_diff_se": 0.05},
        {"target": "flip", "majority": "M", "convention": "strong", "forecaster": "coin", "n": 67, "brier": 0.25,
         "log_score": 0.693, "brier_diff": 0.07, "brier_diff_se": 0.02, "log_diff": 0.093, "log_diff_se": 0.05}])
    w = rival_wins(comp, where="same setting: ")
    assert w == ["same setting: committed-fraction logistic beats normlab on flips of a consensus on M, the strong "
                 "convention, 67 runs: Brier 0.150 vs 0.180 (paired difference -0.030 +/- 0.020 s.e.)"]
    assert rival_wins(comp[comp["forecaster"] != "logistic"]) == []


def test_zero_width_and_rival_coverage(observed, hand_prediction):
    sc = score(hand_prediction, observed, exclude=_fit_runs(observed), rng=0)
    cv = sc.coverage
    cs = sc.coverage_summary().set_index(["group", "interval"])
    e = cv[cv["interval"] == "experiment"]
    assert cs.loc[("all", "experiment"), "zero_width"] == pytest.approx((e["low"] == e["high"]).mean())
    assert cs.loc[("all", "experiment"), "covered"] == pytest.approx(e["covered"].mean())
    other = e[e["low"] != e["high"]]
    if len(other):
        assert cs.loc[("all", "experiment"), "covered_other"] == pytest.approx(other["covered"].mean())
    s = sc.summary()
    assert s["coverage"]["zero_width_experiment"] == pytest.approx((e["low"] == e["high"]).mean())
    # a rival's interval of a flip fraction is the binomial of the observed runs at its probability
    rc = sc.rival_coverage
    row = rc[(rc["forecaster"] == "direction_rule") & (rc["quantity"] == "flip_fraction")].iloc[0]
    p = sc.settings["rivals"]["base_rate"]["p"]["B"]
    lo, hi = _binomial_interval(p, int(row["n_obs"]), 0.95)
    assert (row["low"], row["high"]) == (lo / row["n_obs"], hi / row["n_obs"])
    from scipy.stats import binom

    cdf = binom.cdf(np.arange(int(row["n_obs"]) + 1), int(row["n_obs"]), p)
    assert lo == int(np.flatnonzero(cdf >= 0.025)[0]) and hi == int(np.flatnonzero(cdf >= 0.975)[0])
    k = round(row["observed"] * row["n_obs"])
    assert row["covered"] == (lo <= k <= hi)
    # normlab's own rows are its experiment intervals of the same quantities
    own = rc[rc["forecaster"] == "normlab"]
    assert len(own) == len(e[e["quantity"].isin(["flip_fraction", "p_consensus"])])
    fcv = s["fraction_coverage"]["flip"]
    assert fcv["n"] == (own["quantity"] == "flip_fraction").sum()
    assert set(fcv) >= {"normlab", "direction_rule", "logistic", "zero_width"}


def test_printed_block_shows_every_rival(observed, hand_prediction):
    from normlab.calibration._cli import format_summary

    sc = score(hand_prediction, observed, exclude=_fit_runs(observed), rng=0)
    s = sc.summary()
    text = format_summary({"names": ["A", "B"], "n_agents": 6, "memory": 2, "scores": s})
    for lab in ("normlab:", "direction rule:", "committed-fraction logistic:", "coin (every outcome equally likely):",
                "base rate of the fit runs", "zero-width", "where a rival scores better than normlab",
                "from a consensus on A"):
        assert lab in text, lab
    assert f"Brier {s['rivals']['direction_rule']['brier_flip']:.3f}" in text
    for w in s["rival_wins"]:
        assert w in text
    assert "[direction rule " in repr(sc) and "zero-width" in repr(sc)
    assert ("Where a rival" in sc._repr_html_()) == bool(s["rival_wins"])
